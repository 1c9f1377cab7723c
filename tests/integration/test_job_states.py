"""The job state machine: every legal transition happens once; every illegal one is a no-op
with a zero row count."""

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from core.sql import Queries
from tests.support.jobs import enqueue, status_of

queries = Queries("generation")
HOUR = timedelta(hours=1)


async def claim(
    pool: asyncpg.Pool, worker: str = "w:1", now: datetime | None = None, want: int = 10
) -> list[int]:
    rows = await pool.fetch(
        queries["job_claim_within_cap"], want, 100, 100, worker, now, None, 0, 0
    )
    return [row["id"] for row in rows]


async def finish(pool: asyncpg.Pool, job_id: int, attempt: int, status: str) -> bool:
    rows = await pool.fetch(
        queries["jobs_finish_if_generating"], [job_id], [attempt], [status], [None], [None], [None]
    )
    return len(rows) == 1


async def test_claim_moves_pending_to_generating_and_bumps_the_attempt(pool: asyncpg.Pool) -> None:
    job = await enqueue(pool)
    assert await claim(pool) == [job]
    row = await status_of(pool, job)
    assert (row["status"], row["attempt"], row["worker_id"]) == ("generating", 1, "w:1")
    assert await claim(pool) == [], "a generating job is not claimed again"


@pytest.mark.parametrize("final", ["completed", "awaiting_review", "failed"])
async def test_a_generating_job_finishes_once_under_its_attempt(
    pool: asyncpg.Pool, final: str
) -> None:
    job = await enqueue(pool)
    await claim(pool)
    assert not await finish(pool, job, 2, final), "a wrong attempt changes nothing"
    assert await finish(pool, job, 1, final)
    assert (await status_of(pool, job))["status"] == final
    for again in ("completed", "awaiting_review", "failed"):
        assert not await finish(pool, job, 1, again), f"{final} -> {again} must be a no-op"
    assert (await status_of(pool, job))["status"] == final


async def test_only_a_pending_job_is_cancelled(pool: asyncpg.Pool) -> None:
    generating, pending = await enqueue(pool), await enqueue(pool)
    assert await claim(pool, want=1) == [generating]
    assert await pool.fetchval(queries["job_cancel_if_pending"], pending) == pending
    assert await pool.fetchval(queries["job_cancel_if_pending"], pending) is None
    assert await pool.fetchval(queries["job_cancel_if_pending"], generating) is None
    assert (await status_of(pool, generating))["status"] == "generating"
    assert await claim(pool) == [], "a cancelled job is never claimed"


async def test_finished_jobs_are_not_swept_and_terminal_jobs_stay_terminal(
    pool: asyncpg.Pool,
) -> None:
    later = datetime.now(UTC) + 2 * HOUR
    done = await enqueue(pool)
    await claim(pool)
    assert await finish(pool, done, 1, "completed")
    assert await pool.fetch(queries["jobs_fail_if_stale"], HOUR, HOUR, later) == []
    assert await pool.fetch(queries["jobs_fail_if_pending_expired"], HOUR, later) == []
    assert await pool.fetchval(queries["job_cancel_if_pending"], done) is None
    assert (await status_of(pool, done))["status"] == "completed"


async def test_the_sweeper_fails_stale_and_expired_jobs_with_a_reason(pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC)
    generating = await enqueue(pool, "a", now=now)
    await claim(pool, now=now)
    waiting = await enqueue(pool, "b", now=now)
    minute = timedelta(minutes=1)

    assert (
        await pool.fetch(queries["jobs_fail_if_stale"], minute, HOUR, now + 30 * minute / 60) == []
    )
    swept = await pool.fetch(queries["jobs_fail_if_stale"], minute, HOUR, now + 2 * minute)
    assert [row["id"] for row in swept] == [generating]
    assert "stopped heartbeating" in swept[0]["error"]

    assert await pool.fetch(queries["jobs_fail_if_pending_expired"], HOUR, now + 59 * minute) == []
    expired = await pool.fetch(queries["jobs_fail_if_pending_expired"], HOUR, now + 61 * minute)
    assert [row["id"] for row in expired] == [waiting]
    row = await status_of(pool, waiting)
    assert row["status"] == "failed"
    assert "waited in the queue longer than 01:00:00" in row["error"]


async def test_a_job_generating_past_the_hard_limit_is_failed_even_with_fresh_heartbeats(
    pool: asyncpg.Pool,
) -> None:
    start = datetime.now(UTC)
    job = await enqueue(pool, now=start)
    await claim(pool, now=start)
    ten_minutes = timedelta(minutes=10)
    late = start + ten_minutes + timedelta(seconds=1)
    assert await pool.fetch(queries["jobs_heartbeat_if_generating"], [job], [1], late)
    swept = await pool.fetch(queries["jobs_fail_if_stale"], timedelta(minutes=1), ten_minutes, late)
    assert [row["id"] for row in swept] == [job]
    assert "ran longer than 00:10:00" in swept[0]["error"]


async def test_heartbeats_answer_only_for_jobs_still_held_under_their_attempt(
    pool: asyncpg.Pool,
) -> None:
    held, other = await enqueue(pool, "a"), await enqueue(pool, "b")
    await claim(pool)
    alive = await pool.fetch(queries["jobs_heartbeat_if_generating"], [held, other], [1, 7], None)
    assert [row["id"] for row in alive] == [held]
