"""One replenishment pass in a process of its own, for the test that runs two at once:

    python -m tests.support.replenish_process DOMAIN_MAP

Settings come from the environment, as for `warmpool worker`. The pass starts once the test
releases BARRIER_LOCK, so that two processes start theirs at the same moment; it prints what
it enqueued as JSON.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import asyncpg
import msgspec

from core import domains
from server import database
from server.services import replenisher
from server.settings import from_environment

BARRIER_LOCK = 0x72_65_66_69  # "refi"


async def main(map_file: Path) -> None:
    settings = from_environment()
    assert settings.database_url
    domain_map = domains.load(map_file)
    pool = await database.create_pool(settings.database_url)
    barrier = await asyncpg.connect(settings.database_url)
    try:
        await barrier.execute("SELECT pg_advisory_lock_shared($1)", BARRIER_LOCK)
        result = await replenisher(pool, settings, domain_map).run_once()
    finally:
        await barrier.close()
        await pool.close()
    print(msgspec.json.encode(result, enc_hook=int).decode(), flush=True)  # ids as numbers


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
