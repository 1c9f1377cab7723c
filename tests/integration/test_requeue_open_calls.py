"""A dead worker's job whose model call the provider may still hold goes back to the queue
under a new attempt (the sweeper after the heartbeat timeout; the dead process's successor at
once), so that attempt takes the call over; without such a call, past the hard limit, or at the
last attempt, it is failed as before."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from functools import partial

import asyncpg
import pytest

from generation.sweeper import REQUEUE_ATTEMPTS_BELOW, Sweeper
from tests.support.dispatching import DEAD, restarted
from tests.support.jobs import claim, enqueue, status_of
from tests.support.polling import eventually

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


async def generating(pool: asyncpg.Pool, now: datetime, *, attempt: int = 1) -> int:
    job = await enqueue(pool, now=now)
    assert await claim(pool, worker=DEAD, now=now) == [job]
    await pool.execute("UPDATE generation_jobs SET attempt = $2 WHERE id = $1", job, attempt)
    return job


async def with_call(
    pool: asyncpg.Pool, job: int, *, outcome: str = "started", provider_id: str | None = "resp_1"
) -> None:
    await pool.execute(
        """
        INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, mode,
                               provider_id, outcome)
        SELECT id, attempt, 1, 'generate', 'openai', 'm', 'background', $2, $3
        FROM generation_jobs WHERE id = $1
        """,
        job,
        provider_id,
        outcome,
    )


def sweeper(pool: asyncpg.Pool) -> Sweeper:
    return Sweeper(pool, heartbeat_timeout=MINUTE, stuck_after=HOUR, pending_expiry=24 * HOUR)


@pytest.mark.parametrize("outcome", ["started", "ok"])
async def test_the_sweeper_requeues_a_stale_job_with_a_call_to_take_over(
    pool: asyncpg.Pool, outcome: str
) -> None:
    now = datetime.now(UTC)
    job = await generating(pool, now)
    await with_call(pool, job, outcome=outcome)
    swept = await sweeper(pool).run_once(now + 2 * MINUTE)
    assert (swept.requeued, swept.stale) == ([job], [])
    row = await status_of(pool, job)
    assert (row["status"], row["attempt"], row["worker_id"], row["error"]) == (
        "pending",
        2,
        None,
        None,
    )
    assert await claim(pool, now=now + 3 * MINUTE) == [job], "claimed again, as attempt 3"


@pytest.mark.parametrize(
    ("outcome", "provider_id"),
    [("started", None), ("failed", "resp_1"), ("malformed", "resp_1")],
)
async def test_a_stale_job_without_a_call_to_take_over_is_failed(
    pool: asyncpg.Pool, outcome: str, provider_id: str | None
) -> None:
    now = datetime.now(UTC)
    job = await generating(pool, now)
    await with_call(pool, job, outcome=outcome, provider_id=provider_id)
    swept = await sweeper(pool).run_once(now + 2 * MINUTE)
    assert (swept.requeued, swept.stale) == ([], [job])
    assert (await status_of(pool, job))["status"] == "failed"


async def test_a_job_past_the_hard_limit_or_at_its_last_attempt_is_failed(
    pool: asyncpg.Pool,
) -> None:
    now = datetime.now(UTC)
    stuck = await generating(pool, now)
    last = await generating(pool, now + 2 * HOUR - 5 * MINUTE, attempt=REQUEUE_ATTEMPTS_BELOW)
    for job in (stuck, last):
        await with_call(pool, job)
    swept = await sweeper(pool).run_once(now + 2 * HOUR)
    assert (swept.requeued, sorted(swept.stale)) == ([], sorted([stuck, last]))


async def test_a_dead_process_successor_requeues_its_job_with_a_call_to_take_over(
    pool: asyncpg.Pool,
) -> None:
    now = datetime.now(UTC) - 2 * MINUTE
    resumable, plain = await generating(pool, now), await generating(pool, now)
    await with_call(pool, resumable)
    assert sorted(await restarted(pool).reconcile()) == sorted([resumable, plain])
    assert (await status_of(pool, resumable))["status"] == "pending"
    assert (await status_of(pool, plain))["status"] == "failed"


async def test_the_claims_a_job_spent_waiting_for_batches_do_not_count_towards_its_last(
    pool: asyncpg.Pool,
) -> None:
    now = datetime.now(UTC)
    # Claimed once per batch answer (three), then once more and its worker died: one death.
    batched = await generating(pool, now, attempt=REQUEUE_ATTEMPTS_BELOW + 2)
    for number in (1, 2, 3):
        await pool.execute(
            """
            INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, mode,
                                   provider_id, outcome, try_number)
            VALUES ($1, $2, 1, $3, 'openai', 'm', 'batch', $4, 'ok', $5)
            """,
            batched,
            number,
            "generate" if number == 1 else "sabotage",
            f"job-{batched}-attempt-{number}",
            max(1, number - 1),
        )
    swept = await sweeper(pool).run_once(now + 2 * MINUTE)
    assert (swept.requeued, swept.stale) == ([batched], [])


async def test_a_job_that_goes_stale_while_the_requeue_waits_is_requeued_not_failed(
    pool: asyncpg.Pool,
) -> None:
    """A sweep judges every job at one moment: a job whose heartbeat goes silent while the
    requeue waits for a row another session holds is left for the next sweep's requeue, never
    failed by the statement after it, whose own now() would find it stale."""
    timeout = timedelta(seconds=2)
    clock = await pool.fetchval("SELECT now()")
    held = await generating(pool, clock - 2 * timeout)
    late = await generating(pool, clock - timeout / 4)
    for job in (held, late):
        await with_call(pool, job)
    quick = Sweeper(pool, heartbeat_timeout=timeout, stuck_after=HOUR, pending_expiry=24 * HOUR)
    async with pool.acquire() as holder:
        locked = holder.transaction()
        await locked.start()
        await holder.execute("SELECT 1 FROM generation_jobs WHERE id = $1 FOR UPDATE", held)
        sweep = asyncio.create_task(quick.run_once())
        await eventually(
            partial(
                pool.fetchval,
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'",
            ),
            within=10,
            what="the requeue waiting for the held row",
        )
        await eventually(
            partial(pool.fetchval, "SELECT now() > $1", clock + timeout),
            within=10,
            what="the late job's heartbeat going stale",
        )
        await locked.commit()
    swept = await sweep
    assert (swept.requeued, swept.stale) == ([held], [])
    assert (await status_of(pool, late))["status"] == "generating"
    assert (await quick.run_once()).requeued == [late]
