"""The chaos suite's sampler on a table the test moves by hand: the highest in-flight count,
and a killed worker's reclaim, which a claim committed after the kill starts anew."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.chaos.sampler import Reclaim, Sampler
from tests.support.polling import eventually


@pytest.fixture
async def sampler(database_url: str) -> AsyncIterator[Sampler]:
    sampler = Sampler(database_url)
    stop = asyncio.Event()
    running = asyncio.create_task(sampler.run(stop))
    yield sampler
    stop.set()
    await running


async def claim(pool: asyncpg.Pool, worker_id: str) -> int:
    job_id: int = await pool.fetchval(
        """INSERT INTO generation_jobs (lane, domain, status, attempt, worker_id, fair_time)
           VALUES ('replenish', 'marketing-copy', 'generating', 1, $1, now()) RETURNING id""",
        worker_id,
    )
    return job_id


async def sweep(pool: asyncpg.Pool, worker_id: str) -> None:
    await pool.execute(
        "UPDATE generation_jobs SET status = 'failed' WHERE worker_id = $1", worker_id
    )


async def test_the_highest_in_flight_and_a_reclaim_that_a_late_claim_restarts(
    pool: asyncpg.Pool, sampler: Sampler
) -> None:
    for worker_id in ("dead:1", "dead:1", "alive:2"):
        await claim(pool, worker_id)
    # Both holders in one sample: it counted all three claims.
    await eventually(lambda: _holding(sampler, {"dead:1", "alive:2"}), 5, "the claims sampled")
    reclaim = sampler.watch("dead:1", time.monotonic())

    await sweep(pool, "dead:1")
    await eventually(lambda: _reclaimed(reclaim), 5, "the reclaim")
    # A claim the worker sent before it died commits now: its job must be reclaimed too.
    await claim(pool, "dead:1")
    await eventually(lambda: _not_reclaimed(reclaim), 5, "the late claim sampled")
    swept_at = time.monotonic()
    await sweep(pool, "dead:1")
    await sampler.reclaimed(reclaim, within=5, settle=0.1)

    assert reclaim.reclaimed_at is not None
    assert reclaim.reclaimed_at >= swept_at
    assert sampler.highest == 3
    assert sampler.holders == {"alive:2"}


async def _holding(sampler: Sampler, worker_ids: set[str]) -> bool:
    return sampler.holders == worker_ids


async def _reclaimed(reclaim: Reclaim) -> bool:
    return reclaim.reclaimed_at is not None


async def _not_reclaimed(reclaim: Reclaim) -> bool:
    return reclaim.reclaimed_at is None
