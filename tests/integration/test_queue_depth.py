"""The pending depth kept beside the queue equals the pending jobs, per lane, after every
transition and under concurrent enqueues and claims from many connections."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg

from core.sql import Queries
from generation import admission
from tests.support.jobs import claim, enqueue

queries = Queries("generation")
MANY = admission.AdmissionLimits(user_cap=1000, max_pending=100_000, replenish_max_pending=100_000)


async def depth(pool: asyncpg.Pool) -> dict[str, tuple[int, int]]:
    """Per lane: (kept depth, pending jobs counted)."""
    kept = await pool.fetchrow(
        "SELECT sum(interactive)::int AS interactive, sum(replenish)::int AS replenish "
        "FROM generation_queue_depth"
    )
    counted: dict[str, int] = {
        row["lane"]: row["jobs"]
        for row in await pool.fetch(
            "SELECT lane, count(*)::int AS jobs FROM generation_jobs WHERE status = 'pending' "
            "GROUP BY lane"
        )
    }
    assert kept is not None
    return {lane: (kept[lane], counted.get(lane, 0)) for lane in ("interactive", "replenish")}


async def assert_kept(pool: asyncpg.Pool, after: str) -> None:
    for lane, (kept, counted) in (await depth(pool)).items():
        assert kept == counted, f"after {after}: {lane} depth kept {kept}, pending {counted}"


async def test_every_transition_in_and_out_of_pending_moves_the_depth(pool: asyncpg.Pool) -> None:
    jobs = [await enqueue(pool, f"user-{index}", limits=MANY) for index in range(4)]
    jobs += [await enqueue(pool, None, limits=MANY) for _ in range(4)]
    await assert_kept(pool, "enqueues on both lanes")
    assert await depth(pool) == {"interactive": (4, 4), "replenish": (4, 4)}

    claimed = await claim(pool, "w:box:1", want=3)
    await assert_kept(pool, "a claim")
    await pool.execute(queries["jobs_release_if_generating"], claimed[:1], [1])
    await assert_kept(pool, "a release at a stop")
    await pool.execute(queries["jobs_release_if_not_held"], "w:box:1", claimed[1:2])
    await assert_kept(pool, "a release of a lost claim's job")
    await pool.execute(queries["job_cancel_if_pending"], jobs[-1])
    await assert_kept(pool, "a cancel")
    later = datetime.now(UTC) + timedelta(days=1)
    await pool.execute(queries["jobs_fail_if_pending_expired"], timedelta(hours=1), later)
    await assert_kept(pool, "the pending expiry")
    assert await depth(pool) == {"interactive": (0, 0), "replenish": (0, 0)}
    await pool.execute(
        queries["jobs_fail_if_stale"], timedelta(minutes=1), timedelta(hours=1), later
    )
    await pool.execute(queries["jobs_delete_finished_before"], later + timedelta(days=1), 100)
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 0
    await assert_kept(pool, "the sweeper and retention")


async def test_concurrent_enqueues_and_claims_keep_the_depth_exact(pool: asyncpg.Pool) -> None:
    async def enqueues(client: int) -> None:
        for index in range(40):
            user = f"user-{client}-{index}" if index % 2 else None
            await enqueue(pool, user, limits=MANY)

    async def claims(worker: int) -> None:
        for _ in range(20):
            await claim(pool, f"w:box:{worker}", want=2)

    await asyncio.gather(*(enqueues(n) for n in range(8)), *(claims(n) for n in range(4)))
    await assert_kept(pool, "concurrent enqueues and claims")
    assert sum(counted for _, counted in (await depth(pool)).values()) > 0
