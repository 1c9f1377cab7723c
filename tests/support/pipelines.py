"""Running pending jobs through a generator, as a worker process does: claimed by the
dispatcher, run by a worker, their ends written, all within the test."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import asyncpg
import msgspec

from core.domains import DomainMap, load
from generation.dispatcher import Dispatcher
from generation.jobs import ClaimedJob
from generation.sweeper import Sweeper
from generation.worker import Generator, Worker

MINUTE = timedelta(minutes=1)
ROOT = Path(__file__).resolve().parents[2]


def shipped_map(**changes: object) -> DomainMap:
    """The shipped domain map, with these keys of python-backend's entry changed."""
    shipped = load(ROOT / "domain_map.yaml")
    backend = msgspec.structs.replace(shipped.domains["python-backend"], **changes)
    return msgspec.structs.replace(shipped, domains=shipped.domains | {"python-backend": backend})


async def run_pending(
    pool: asyncpg.Pool, generator: Generator, *, count: int = 1, grace_seconds: float = 120
) -> list[ClaimedJob]:
    """Claim up to `count` pending jobs and run each to its end; the jobs claimed."""
    worker = Worker(pool, generator, name="test-worker", capacity=count)
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    dispatcher = Dispatcher(pool, worker, sweeper, global_cap=count, replenish_cap=count)
    claimed = await dispatcher.run_once()
    assert await worker.drain(grace_seconds=grace_seconds)
    return claimed
