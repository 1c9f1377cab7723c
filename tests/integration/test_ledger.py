"""What a model call is booked at: its priced usage; nothing when the request was refused
unprocessed; its ceiling when it may have billed with no usage to show. The ledger's totals per
outcome, and per day, model, purpose and outcome, always match its rows."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import asyncpg
import pytest

from generation import ledger as ledgers
from generation import spend_report
from generation.ledger import Ledger, Outcome
from tests.support.jobs import enqueue
from tests.support.polling import eventually

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


async def test_the_totals_match_the_whole_ledger_after_many_calls_at_once(
    pool: asyncpg.Pool, ledger: Ledger
) -> None:
    """The per-outcome totals that /metrics reads, kept by the ledger's triggers, against the
    ledger summed row by row: calls started and ended on many connections at once, some of them
    still under way when the two are compared."""
    outcomes: list[Outcome] = ["ok", "failed", "refused", "malformed", "unbilled"]
    finish = asyncio.Event()

    async def call(number: int) -> None:
        async with ledger.call("generate", "test", "m") as record:
            record.input_tokens, record.output_tokens = number, 2 * number
            record.cost_usd, record.priced = Decimal(number) / 1000, True
            record.outcome = outcomes[number % len(outcomes)]
            if number % 10 == 0:
                await finish.wait()

    calls = [asyncio.create_task(call(number)) for number in range(60)]
    await eventually(lambda: ended(pool, 54), within=30, what="54 calls ended")
    assert await totals(pool) == await sums(pool)
    assert await daily_totals(pool) == await daily_sums(pool)
    assert (await totals(pool))["started"] == (6, 0, 0, Decimal(0))
    finish.set()
    await asyncio.gather(*calls)
    assert await totals(pool) == await sums(pool)
    assert await daily_totals(pool) == await daily_sums(pool)
    assert "started" not in await totals(pool)


async def ended(pool: asyncpg.Pool, count: int) -> bool:
    ended_calls: int = await pool.fetchval(
        "SELECT count(*) FROM llm_calls WHERE outcome <> 'started'"
    )
    return ended_calls == count


Figures = tuple[int, int, int, Decimal]


async def totals(pool: asyncpg.Pool) -> dict[str, Figures]:
    """What /metrics reads, without the outcomes no call has now."""
    return {
        outcome: (
            spent.llm_calls,
            spent.input_tokens,
            spent.output_tokens,
            Decimal(str(spent.cost_usd)),
        )
        for outcome, spent in (await ledgers.totals(pool)).by_outcome.items()
        if spent.llm_calls
    }


async def sums(pool: asyncpg.Pool) -> dict[str, Figures]:
    rows = await pool.fetch(
        "SELECT outcome, count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)"
        " FROM llm_calls GROUP BY outcome"
    )
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}


async def daily_totals(pool: asyncpg.Pool) -> dict[tuple[object, ...], Figures]:
    """What the spend page reads."""
    today = datetime.now(UTC).date()
    days = await spend_report.by_day(pool, first=today - timedelta(days=1), last=today)
    return {
        (group.day, group.model, group.purpose, group.outcome): (
            group.spend.llm_calls,
            group.spend.input_tokens,
            group.spend.output_tokens,
            Decimal(str(group.spend.cost_usd)),
        )
        for day in days
        for group in day.groups
    }


async def daily_sums(pool: asyncpg.Pool) -> dict[tuple[object, ...], Figures]:
    rows = await pool.fetch(
        "SELECT (started_at AT TIME ZONE 'UTC')::date, model, purpose, outcome, count(*),"
        " sum(input_tokens), sum(output_tokens), sum(cost_usd)"
        " FROM llm_calls GROUP BY 1, 2, 3, 4"
    )
    return {tuple(row[:4]): (row[4], row[5], row[6], row[7]) for row in rows}
