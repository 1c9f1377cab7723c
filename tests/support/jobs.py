"""Putting jobs into a test database, and through their states, with the real queue code."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from core.sql import Queries
from generation import admission

queries = Queries("generation")

LIMITS = admission.AdmissionLimits(user_cap=3, max_pending=200, replenish_max_pending=100)


async def enqueue(
    pool: asyncpg.Pool,
    user_id: str | None = "user-1",
    *,
    domain: str = "python-backend",
    limits: admission.AdmissionLimits = LIMITS,
    now: datetime | None = None,
) -> int:
    async with pool.acquire() as connection:
        async with connection.transaction():
            job_id = await admission.enqueue(
                connection,
                lane="interactive" if user_id else "replenish",
                user_id=user_id,
                track="backend-engineer" if user_id else None,
                domain=domain,
                limits=limits,
                now=now,
            )
        await admission.wake_dispatchers(connection)
    return job_id


async def status_of(pool: asyncpg.Pool, job_id: int) -> asyncpg.Record:
    row = await pool.fetchrow(
        "SELECT status, attempt, error, worker_id FROM generation_jobs WHERE id = $1", job_id
    )
    assert row is not None
    return row


async def job_count(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM generation_jobs"))


async def claim(
    pool: asyncpg.Pool, worker: str = "w:1", now: datetime | None = None, want: int = 10
) -> list[int]:
    rows = await pool.fetch(
        queries["job_claim_within_cap"], want, 100, 100, worker, now, None, 0, 0, None
    )
    return [row["id"] for row in rows]


async def finish(
    pool: asyncpg.Pool,
    job_id: int,
    attempt: int,
    status: str,
    *,
    error: str | None = None,
    mission_id: int | None = None,
) -> bool:
    rows = await pool.fetch(
        queries["jobs_finish_if_generating"],
        [job_id],
        [attempt],
        [status],
        [error],
        [mission_id],
        [None],
    )
    return len(rows) == 1


async def job_in(
    pool: asyncpg.Pool,
    status: str,
    user_id: str = "user-1",
    *,
    worker: str = "w:1",
    mission_id: int | None = None,
) -> int:
    """A job brought to `status` by the real transitions: claimed by `worker` under attempt 1
    unless pending or cancelled, and finished naming `mission_id`. A claim takes the oldest
    pending job, so make pending jobs last."""
    job = await enqueue(pool, user_id)
    if status == "cancelled":
        assert await pool.fetchval(queries["job_cancel_if_pending"], job) == job
    elif status != "pending":
        assert await claim(pool, worker, want=1) == [job]
        if status != "generating":
            error = "it failed" if status == "failed" else None
            assert await finish(pool, job, 1, status, error=error, mission_id=mission_id)
    assert (await status_of(pool, job))["status"] == status
    return job


async def start_generating(pool: asyncpg.Pool, *job_ids: int) -> None:
    await pool.execute(
        "UPDATE generation_jobs SET status = 'generating', attempt = 1, worker_id = 'test-host:1',"
        " started_at = now(), heartbeat_at = now() WHERE id = ANY($1)",
        list(job_ids),
    )
