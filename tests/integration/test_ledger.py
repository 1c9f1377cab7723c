"""What a model call is booked at: its priced usage; nothing when the request was refused
unprocessed; its ceiling when it may have billed with no usage to show."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
import pytest

from generation.ledger import Ledger
from tests.support.jobs import enqueue

CEILING = Decimal("0.0126")


@pytest.fixture
async def ledger(pool: asyncpg.Pool) -> Ledger:
    job = await enqueue(pool)
    await pool.execute(
        "UPDATE generation_jobs SET status = 'generating', attempt = 1, worker_id = 'w:1' "
        "WHERE id = $1",
        job,
    )
    return Ledger(pool, job, 1)


async def booked(pool: asyncpg.Pool) -> tuple[str, Decimal, str | None]:
    row = await pool.fetchrow("SELECT outcome, cost_usd, error FROM llm_calls")
    assert row is not None
    return row["outcome"], row["cost_usd"], row["error"]


async def test_a_priced_call_is_booked_at_its_usage(pool: asyncpg.Pool, ledger: Ledger) -> None:
    async with ledger.call("generate", "openai", "m", ceiling_usd=CEILING) as record:
        record.cost_usd, record.priced = Decimal("0.002"), True
    assert await booked(pool) == ("ok", Decimal("0.002"), None)


async def test_a_request_refused_unprocessed_is_booked_at_nothing(
    pool: asyncpg.Pool, ledger: Ledger
) -> None:
    async def refused() -> None:
        async with ledger.call("generate", "openai", "m", ceiling_usd=CEILING) as record:
            record.outcome, record.error = "unbilled", "answered 400"
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        await refused()
    assert await booked(pool) == ("unbilled", Decimal(0), "answered 400")


async def test_a_call_cancelled_mid_request_is_booked_at_its_ceiling(
    pool: asyncpg.Pool, ledger: Ledger
) -> None:
    started = asyncio.Event()

    async def call() -> None:
        async with ledger.call("generate", "openai", "m", ceiling_usd=CEILING):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(call())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await booked(pool) == (
        "failed",
        CEILING,
        "cancelled mid-call; booked at its ceiling of $0.0126",
    )


async def test_an_answer_without_usage_is_booked_at_its_ceiling(
    pool: asyncpg.Pool, ledger: Ledger
) -> None:
    async with ledger.call("generate", "openai", "m", ceiling_usd=CEILING):
        pass
    assert await booked(pool) == ("ok", CEILING, "booked at its ceiling of $0.0126")
