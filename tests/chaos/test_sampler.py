"""The chaos suite's sampler on a table the test moves by hand: the highest in-flight count, a
killed worker's reclaim, which a claim committed after the kill starts anew, the oldest
generating job's age beyond its domain's allowance and the count of jobs ended."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from itertools import pairwise

import asyncpg
import pytest

from tests.chaos.sampler import Reclaim, Sampler
from tests.support.polling import eventually


@pytest.fixture
async def sampler(database_url: str) -> AsyncIterator[Sampler]:
    sampler = Sampler(database_url, allowances={"python-backend": 50.0})
    stop = asyncio.Event()
    running = asyncio.create_task(sampler.run(stop))
    yield sampler
    stop.set()
    await running


async def claim(
    pool: asyncpg.Pool, worker_id: str, seconds_ago: float = 0, domain: str = "marketing-copy"
) -> int:
    job_id: int = await pool.fetchval(
        """INSERT INTO generation_jobs
               (lane, domain, status, attempt, worker_id, fair_time, started_at)
           VALUES ('replenish', $3, 'generating', 1, $1, now(),
                   now() - make_interval(secs => $2))
           RETURNING id""",
        worker_id,
        seconds_ago,
        domain,
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


async def test_the_oldest_generating_job_and_the_jobs_ended(
    pool: asyncpg.Pool, sampler: Sampler
) -> None:
    await claim(pool, "alive:1", seconds_ago=60)
    await claim(pool, "alive:2", seconds_ago=5)
    await eventually(lambda: _oldest_beyond(sampler, 60), 5, "the oldest job sampled")
    await eventually(lambda: _ended(sampler, 0), 5, "no job ended yet")

    await sweep(pool, "alive:1")
    await eventually(lambda: _ended(sampler, 1), 5, "the swept job ended")
    await eventually(lambda: _oldest_below(sampler, 60), 5, "the younger job the oldest")

    assert 5 <= sampler.oldest[-1].age < 60
    assert all(later >= earlier for (_, earlier), (_, later) in pairwise(sampler.ended))


async def test_a_job_is_as_old_as_it_is_beyond_its_domains_allowance(
    pool: asyncpg.Pool, sampler: Sampler
) -> None:
    await claim(pool, "alive:1", seconds_ago=60, domain="python-backend")
    copy = await claim(pool, "alive:2", seconds_ago=30)
    await eventually(lambda: _oldest_beyond(sampler, 30), 5, "the copy job sampled")

    assert sampler.oldest[-1].job_id == copy
    assert 30 <= sampler.oldest[-1].age < 40


async def _oldest_beyond(sampler: Sampler, seconds: float) -> bool:
    return bool(sampler.oldest) and sampler.oldest[-1].age >= seconds


async def _oldest_below(sampler: Sampler, seconds: float) -> bool:
    return bool(sampler.oldest) and sampler.oldest[-1].age < seconds


async def _ended(sampler: Sampler, jobs: int) -> bool:
    return bool(sampler.ended) and sampler.ended[-1][1] == jobs
