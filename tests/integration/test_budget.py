"""The daily spend budget as admission control: reservations at claim time, exact under
concurrent claims, replenishment stopped first, settled to the real cost."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from decimal import Decimal

import asyncpg

from generation.budget import Budget, status
from generation.dispatcher import Dispatcher
from generation.sweeper import Sweeper
from generation.worker import Worker
from tests.support.generators import Gated
from tests.support.jobs import enqueue

MINUTE = timedelta(minutes=1)
BUDGET = Budget(
    daily_usd=Decimal("1.00"),
    job_reservation_usd=Decimal("0.30"),
    interactive_reserve_usd=Decimal("0.20"),
)


def dispatcher(
    pool: asyncpg.Pool, gate: Gated, budget: Budget, name: str = "budget-worker"
) -> Dispatcher:
    worker = Worker(pool, gate, name=name, capacity=40)
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    return Dispatcher(pool, worker, sweeper, global_cap=40, replenish_cap=40, budget=budget)


async def spent_today(pool: asyncpg.Pool, usd: str) -> None:
    await pool.execute(
        "INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, outcome,"
        " cost_usd) SELECT 0, 1, count(*) + 1, 'generate', 'test', 'm', 'ok', $1 FROM llm_calls",
        Decimal(usd),
    )


async def test_claims_stop_at_the_budget_and_replenishment_stops_first(pool: asyncpg.Pool) -> None:
    await spent_today(pool, "0.10")
    for _ in range(4):
        await enqueue(pool, None)
    gate = Gated()
    dispatch = dispatcher(pool, gate, BUDGET)
    # Replenishment may commit up to 1.00 - 0.20 (the reserve): 0.10 + 2 x 0.30.
    assert [job.lane for job in await dispatch.run_once()] == ["replenish", "replenish"]
    assert await dispatch.run_once() == []
    report = await status(pool, BUDGET)
    assert (report.spent_today_usd, report.reserved_usd) == (0.10, 0.60)
    assert report.replenish_paused
    assert not report.exhausted
    # A user waiting may still use the reserve: 0.10 + 0.60 + 0.30 fits under 1.00.
    waiting = [await enqueue(pool, f"user-{index}") for index in range(2)]
    assert [job.id for job in await dispatch.run_once()] == waiting[:1]
    assert await dispatch.run_once() == []
    assert (await status(pool, BUDGET)).exhausted
    gate.release()


async def test_interactive_jobs_claimed_together_spend_the_budget_before_replenishment(
    pool: asyncpg.Pool,
) -> None:
    for index in range(3):
        await enqueue(pool, None)
        await enqueue(pool, f"user-{index}")
    gate = Gated()
    claimed = await dispatcher(pool, gate, BUDGET).run_once()
    # 3 x 0.30 fits under 1.00; nothing is left before the reserve for replenishment.
    assert [job.lane for job in claimed] == ["interactive"] * 3
    gate.release()


async def test_the_budget_holds_when_many_workers_claim_at_once(pool: asyncpg.Pool) -> None:
    budget = Budget(
        daily_usd=Decimal("3.00"),
        job_reservation_usd=Decimal("0.25"),
        interactive_reserve_usd=Decimal(0),
    )
    for index in range(40):
        await enqueue(pool, f"user-{index}")
    gate = Gated()
    dispatchers = [dispatcher(pool, gate, budget, name=f"w{index}") for index in range(8)]
    for _ in range(3):
        await asyncio.gather(*(each.run_once() for each in dispatchers))
    reserved = await pool.fetchval(
        "SELECT sum(reserved_usd) FROM generation_jobs WHERE status = 'generating'"
    )
    assert reserved == Decimal("3.00"), "12 jobs of 0.25, and not one more"
    gate.release()


async def test_a_finished_job_settles_to_what_it_really_spent(pool: asyncpg.Pool) -> None:
    for _ in range(4):
        await enqueue(pool, "solo-" + str(_))
    gate = Gated()
    dispatch = dispatcher(pool, gate, BUDGET)
    assert len(await dispatch.run_once()) == 3
    gate.release()
    assert await dispatch.worker.drain(grace_seconds=10)
    # Each job made one model call that the test generator prices at nothing: all settled.
    report = await status(pool, BUDGET)
    assert (report.spent_today_usd, report.reserved_usd) == (0.0, 0.0)
    assert len(await dispatch.run_once()) == 1
