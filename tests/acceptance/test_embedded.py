"""The embedded default: with no database URL, warmpool starts its own PostgreSQL in the data
folder, keeps the data across restarts, and stops the server when it exits."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import environment

pytestmark = pytest.mark.slow

START = """
import asyncio, asyncpg
from server import database, migrate
from server.auth import bootstrap_keys
from server.settings import from_environment

async def main():
    settings = from_environment()
    url = await database.resolve_url(settings)
    pool = await database.create_pool(url)
    async with pool.acquire() as connection:
        await migrate.apply(connection)
        print("version", await migrate.current_version(connection))
    print("keys", len(await bootstrap_keys(pool)))
    await pool.close()

asyncio.run(main())
"""


def start(data_dir: Path) -> str:
    env = environment("unused", {"WARMPOOL_DATA_DIR": str(data_dir)})
    del env["WARMPOOL_DATABASE_URL"]
    done = subprocess.run(
        [sys.executable, "-c", START],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Under /tmp, not pytest's private tmp_path: as root, the embedded server runs as its own
    # user, which must reach the data folder.
    folder = Path(tempfile.mkdtemp(prefix="warmpool-embedded-"))
    folder.chmod(0o755)
    yield folder / "data"
    shutil.rmtree(folder, ignore_errors=True)


def test_the_embedded_database_starts_keeps_its_data_and_stops(data_dir: Path) -> None:
    first = start(data_dir)
    assert "version" in first
    assert "keys 3" in first, "the first start creates one key per role"
    pgdata = data_dir / "pgdata"
    assert (pgdata / "PG_VERSION").exists()
    assert not (pgdata / "postmaster.pid").exists(), "the server stopped when warmpool exited"

    second = start(data_dir)
    assert "keys 0" in second, "the data, keys included, survived the restart"
    assert not (pgdata / "postmaster.pid").exists()
