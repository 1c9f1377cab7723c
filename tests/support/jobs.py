"""Putting jobs into a test database through the real queue code."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from generation import admission

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
