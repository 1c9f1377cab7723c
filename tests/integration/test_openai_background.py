"""Background calls through the real SDK against the stub's Responses API: each call is one
response created once, its id on the ledger row before the answer is awaited; the attempt that
holds the job next takes an unfinished (or answered) call over by that id instead of paying
again; an older attempt can neither take over nor settle; a call the provider dropped is booked
as lost and paid again; the stub's count of responses matches the ledger's rows."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from core.sql import Queries
from generation.abandoned import AbandonedCalls
from generation.budget import Budget
from generation.drafts import MissionDraft
from generation.ledger import JobLost, Ledger
from generation.openai import prices
from generation.openai.provider import OpenAIProvider, worst_case_cost_usd
from generation.provider import ProviderError
from tests.support.openai_stub import DOMAIN, MISSION, MODEL, USAGE, OpenAIStub
from tests.support.polling import eventually

queries = Queries("generation")
PRICE = prices.load().for_model(MODEL)
CEILING = worst_case_cost_usd(PRICE, 1)
REQUEST_SECONDS = 10


def background_provider(openai_stub: OpenAIStub, timeout_seconds: float) -> OpenAIProvider:
    return OpenAIProvider(
        api_key="sk-test",
        base_url=openai_stub.base_url,
        model=MODEL,
        prices=prices.load(),
        timeout_seconds=timeout_seconds,
        calls="background",
    )


@pytest.fixture
async def provider(openai_stub: OpenAIStub) -> AsyncIterator[OpenAIProvider]:
    provider = background_provider(openai_stub, REQUEST_SECONDS)
    yield provider
    await provider.close()


def abandoned_calls(
    pool: asyncpg.Pool, provider: OpenAIProvider, *, budget: Budget | None = None
) -> AbandonedCalls:
    return AbandonedCalls(
        pool,
        provider.background.abandon,
        budget=budget,
        request_seconds=REQUEST_SECONDS,
        call_ceiling_usd=CEILING,
    )


@pytest.fixture
async def job_id(pool: asyncpg.Pool) -> int:
    found: int = await pool.fetchval(
        """
        INSERT INTO generation_jobs
            (lane, domain, status, attempt, worker_id, fair_time, started_at, heartbeat_at)
        VALUES ('replenish', 'python-backend', 'generating', 1, 'test:1', now(), now(), now())
        RETURNING id
        """
    )
    return found


async def next_attempt(pool: asyncpg.Pool, job_id: int) -> Ledger:
    """The job released and claimed again, as at a deploy: the next attempt's ledger."""
    attempt: int = await pool.fetchval(
        "UPDATE generation_jobs SET attempt = attempt + 1 WHERE id = $1 RETURNING attempt", job_id
    )
    return Ledger(pool, job_id, attempt)


async def rows(pool: asyncpg.Pool, job_id: int) -> list[dict[str, Any]]:
    found = await pool.fetch(
        """
        SELECT attempt, purpose, mode, provider_id, outcome, cost_usd, input_tokens,
               resumed, resumed_by_attempt, orphaned, error, finished_at IS NOT NULL AS finished
        FROM llm_calls WHERE job_id = $1 ORDER BY id
        """,
        job_id,
    )
    return [dict(row) for row in found]


async def open_call(pool: asyncpg.Pool, job_id: int) -> bool:
    """The call's row names its response and has not ended: the attempt is waiting for it."""
    return bool(
        await pool.fetchval(
            "SELECT count(*) FROM llm_calls WHERE job_id = $1 AND provider_id IS NOT NULL "
            "AND finished_at IS NULL",
            job_id,
        )
    )


async def interrupted(
    pool: asyncpg.Pool, provider: OpenAIProvider, ledger: Ledger
) -> asyncio.Task[MissionDraft]:
    """Attempt `ledger.attempt` writing the mission, with its answer under way."""
    task = asyncio.create_task(provider.write_mission(DOMAIN, seed=1, ledger=ledger))
    await eventually(lambda: open_call(pool, ledger.job_id), 10, "the response to be created")
    return task


async def test_a_call_is_one_background_response_whose_id_is_on_its_row(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.response_seconds = 0.3
    mission = await provider.write_mission(DOMAIN, seed=3, ledger=Ledger(pool, job_id, 1))

    assert mission == MISSION
    [response] = openai_stub.created()
    assert response.retrieved >= 1, "the answer was awaited by polling"
    body = response.received.body
    assert (body["background"], body["store"], body["model"]) == (True, True, MODEL)
    assert body["text"]["format"]["strict"] is True
    assert body["metadata"] == {
        "job_id": str(job_id),
        "attempt": "1",
        "purpose": "generate",
        "try": "1",
        "seed": "3",
    }
    [row] = await rows(pool, job_id)
    assert (row["mode"], row["provider_id"], row["outcome"]) == ("background", response.id, "ok")
    assert row["cost_usd"] == PRICE.cost(*USAGE["mission"])
    assert (row["resumed"], row["orphaned"], row["error"]) == (0, False, None)


async def test_the_next_attempt_takes_over_an_unfinished_call_and_pays_nothing_again(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    first = await interrupted(pool, provider, Ledger(pool, job_id, 1))
    second = await next_attempt(pool, job_id)
    first.cancel()  # the released generation stops, leaving its call open
    with pytest.raises(asyncio.CancelledError):
        await first
    [row] = await rows(pool, job_id)
    assert (row["outcome"], row["finished"]) == ("started", False)

    openai_stub.let_go()
    assert await provider.write_mission(DOMAIN, seed=1, ledger=second) == MISSION

    assert len(openai_stub.created()) == 1, "the answer was paid for once"
    [row] = await rows(pool, job_id)
    assert (row["attempt"], row["resumed_by_attempt"], row["resumed"]) == (1, 2, 1)
    assert (row["outcome"], row["orphaned"]) == ("ok", False)
    assert row["cost_usd"] == PRICE.cost(*USAGE["mission"])
    spend = await pool.fetchrow(
        "SELECT sum(resumed) AS resumed, sum(resumed * cost_usd) AS saved FROM llm_calls"
    )
    assert spend is not None
    assert (spend["resumed"], spend["saved"]) == (1, PRICE.cost(*USAGE["mission"]))


async def given_back_while_created(
    pool: asyncpg.Pool,
    provider: OpenAIProvider,
    openai_stub: OpenAIStub,
    job_id: int,
    creation_seconds: float,
) -> tuple[asyncio.Task[MissionDraft], Ledger]:
    """Attempt 1 writing the mission, stopped (released at a deploy) while the provider takes
    `creation_seconds` to create its response; and the ledger of attempt 2."""
    openai_stub.plan("slow")
    openai_stub.delay_seconds = creation_seconds
    first = asyncio.create_task(
        provider.write_mission(DOMAIN, seed=1, ledger=Ledger(pool, job_id, 1))
    )
    await eventually(
        lambda: asyncio.sleep(0, len(openai_stub.received)), 10, "the creation to be under way"
    )
    second = await next_attempt(pool, job_id)
    first.cancel()
    return first, second


async def test_a_generation_stopped_while_its_response_is_created_leaves_it_to_the_next(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    first, second = await given_back_while_created(pool, provider, openai_stub, job_id, 0.5)
    with pytest.raises(asyncio.CancelledError):
        await first
    [row] = await rows(pool, job_id)
    assert row["provider_id"] == openai_stub.created()[0].id, "named once created, then left"
    assert (row["outcome"], row["finished"]) == ("started", False)

    assert await provider.write_mission(DOMAIN, seed=1, ledger=second) == MISSION

    assert len(openai_stub.created()) == 1, "the answer was paid for once"
    [row] = await rows(pool, job_id)
    assert (row["outcome"], row["resumed_by_attempt"], row["orphaned"]) == ("ok", 2, False)


@pytest.mark.parametrize(
    ("started", "last_beat", "paid"),
    [
        pytest.param(timedelta(hours=-1), timedelta(0), 1, id="live"),
        pytest.param(timedelta(hours=-1), timedelta(hours=1), 2, id="dead"),
        # A process started after the call, under the same name:host:pid (a pid reused).
        pytest.param(timedelta(hours=1), timedelta(0), 2, id="successor-with-its-pid"),
    ],
)
async def test_the_next_attempt_waits_for_a_live_process_to_name_the_call_it_was_creating(
    pool: asyncpg.Pool,
    provider: OpenAIProvider,
    openai_stub: OpenAIStub,
    job_id: int,
    started: timedelta,
    last_beat: timedelta,
    paid: int,
) -> None:
    """Given back at a deploy while the provider was still creating its response, the job is
    claimed at once elsewhere: that attempt waits for the live process to store the
    response's id and takes the call over, paid once. A dead process's call is not waited
    for (nor one whose name a later process took): nobody will name it."""
    await pool.execute(
        """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots)
           VALUES ('test', 'test:1', now() + $1::interval, now() - $2::interval, 1)""",
        started,
        last_beat,
    )
    first, second = await given_back_while_created(pool, provider, openai_stub, job_id, 1.0)

    assert await provider.write_mission(DOMAIN, seed=1, ledger=second) == MISSION
    with pytest.raises(asyncio.CancelledError):
        await first
    assert len(openai_stub.created()) == paid
    taken = [row["resumed_by_attempt"] for row in await rows(pool, job_id)]
    assert taken == ([2] if paid == 1 else [None, None])


async def test_an_answered_call_of_an_earlier_attempt_is_read_again_not_paid_again(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    await provider.write_mission(DOMAIN, seed=1, ledger=Ledger(pool, job_id, 1))
    second = await next_attempt(pool, job_id)

    assert await provider.write_mission(DOMAIN, seed=1, ledger=second) == MISSION
    assert len(openai_stub.created()) == 1
    [row] = await rows(pool, job_id)
    assert (row["outcome"], row["resumed"], row["resumed_by_attempt"]) == ("ok", 1, 2)
    # A sabotage try is a call of its own: nothing to take over, so it is paid.
    await provider.plant_bug(DOMAIN, MISSION, seed=1, try_number=1, ledger=second)
    assert [each.received.schema_name for each in openai_stub.created()] == ["mission", "sabotage"]


async def test_an_older_attempt_that_wakes_up_can_neither_take_over_nor_settle(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    older = Ledger(pool, job_id, 1)
    first = await interrupted(pool, provider, older)
    second = await next_attempt(pool, job_id)
    taking_over = asyncio.create_task(provider.write_mission(DOMAIN, seed=1, ledger=second))
    await eventually(
        lambda: pool.fetchval(
            "SELECT resumed_by_attempt = 2 FROM llm_calls WHERE job_id = $1", job_id
        ),
        10,
        "the second attempt to take the call over",
    )
    openai_stub.let_go()
    await first  # the older attempt read the answer too, but could not settle it
    await taking_over

    [row] = await rows(pool, job_id)
    assert (row["resumed_by_attempt"], row["resumed"], row["outcome"]) == (2, 1, "ok")
    assert len(openai_stub.created()) == 1
    assert await older.take_over("generate", 1) is None
    with pytest.raises(JobLost):
        await provider.write_mission(DOMAIN, seed=1, ledger=older)
    assert len(openai_stub.created()) == 1


async def test_a_call_the_provider_dropped_is_booked_as_lost_and_paid_again(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    first = await interrupted(pool, provider, Ledger(pool, job_id, 1))
    second = await next_attempt(pool, job_id)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    [lost] = openai_stub.created()
    openai_stub.forget(lost.id)
    openai_stub.let_go()

    assert await provider.write_mission(DOMAIN, seed=1, ledger=second) == MISSION
    dropped, paid = await rows(pool, job_id)
    assert (dropped["attempt"], dropped["outcome"], dropped["resumed"]) == (1, "failed", 0)
    assert dropped["cost_usd"] == CEILING
    assert dropped["error"].startswith(f"the model API no longer holds response {lost.id}")
    assert (paid["attempt"], paid["outcome"], paid["resumed"]) == (2, "ok", 0)
    assert len(openai_stub.created()) == 2 == len(await rows(pool, job_id))


@pytest.mark.parametrize(
    ("behaviour", "outcome", "message", "cost"),
    [
        ("server_error", "failed", "the model API failed the response (The server had", CEILING),
        ("truncated", "malformed", "cut off at the model's output limit (900 tokens)", None),
        ("refusal", "refused", "the model refused: I'm sorry", None),
        ("wrong_shape", "malformed", "the mission answer does not match its schema", None),
    ],
)
async def test_a_response_that_ends_without_a_usable_answer_fails_the_call(
    pool: asyncpg.Pool,
    provider: OpenAIProvider,
    openai_stub: OpenAIStub,
    job_id: int,
    behaviour: Any,
    outcome: str,
    message: str,
    cost: Decimal | None,
) -> None:
    openai_stub.plan(behaviour)
    with pytest.raises(ProviderError, match=re.escape(message)):
        await provider.write_mission(DOMAIN, seed=1, ledger=Ledger(pool, job_id, 1))
    [row] = await rows(pool, job_id)
    assert row["outcome"] == outcome
    assert row["cost_usd"] == (cost if cost is not None else PRICE.cost(*USAGE["mission"]))
    assert len(openai_stub.created()) == 1


async def test_a_response_past_the_time_limit_is_cancelled_at_the_provider(
    pool: asyncpg.Pool, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    provider = background_provider(openai_stub, 0.5)
    try:
        with pytest.raises(ProviderError, match="cancelled at the provider"):
            await provider.write_mission(DOMAIN, seed=1, ledger=Ledger(pool, job_id, 1))
    finally:
        await provider.close()
    [response] = openai_stub.created()
    assert response.status(openai_stub) == "cancelled"
    [row] = await rows(pool, job_id)
    assert (row["outcome"], row["cost_usd"]) == ("failed", CEILING)


async def released_with_open_call(
    pool: asyncpg.Pool, provider: OpenAIProvider, job_id: int
) -> None:
    """Attempt 1's call under way, the job then released back to the queue."""
    first = await interrupted(pool, provider, Ledger(pool, job_id, 1))
    await pool.execute(
        "UPDATE generation_jobs SET status = 'pending', attempt = 2 WHERE id = $1", job_id
    )
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_the_call_of_a_job_cancelled_in_the_queue_is_cancelled_at_the_provider(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    await released_with_open_call(pool, provider, job_id)
    abandoned = abandoned_calls(pool, provider)
    assert await abandoned.run_once() == [], "a job waiting in the queue may still use it"

    assert await pool.fetchval(queries["job_cancel_if_pending"], job_id) == job_id
    call_id = await pool.fetchval("SELECT id FROM llm_calls WHERE job_id = $1", job_id)
    assert await abandoned.run_once() == [call_id]
    [response] = openai_stub.created()
    assert response.status(openai_stub) == "cancelled"
    [row] = await rows(pool, job_id)
    assert (row["outcome"], row["orphaned"], row["cost_usd"]) == ("failed", True, CEILING)
    assert row["error"].startswith("cancelled at the provider: its job will never use it")
    assert await abandoned.run_once() == [], "booked once"


async def test_while_the_budget_stops_every_claim_a_waiting_job_s_call_is_cancelled(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    await released_with_open_call(pool, provider, job_id)
    spent = Budget(
        daily_usd=Decimal("0.01"),
        job_reservation_usd=Decimal(1),
        interactive_reserve_usd=Decimal(0),
    )
    assert len(await abandoned_calls(pool, provider, budget=spent).run_once()) == 1
    assert openai_stub.created()[0].status(openai_stub) == "cancelled"

    # Claimed again all the same, the next attempt finds the call cancelled and pays again.
    openai_stub.let_go()
    second = await next_attempt(pool, job_id)
    await pool.execute("UPDATE generation_jobs SET status = 'generating' WHERE id = $1", job_id)
    assert await provider.write_mission(DOMAIN, seed=1, ledger=second) == MISSION
    cancelled, paid = await rows(pool, job_id)
    assert (cancelled["outcome"], cancelled["resumed"], paid["outcome"]) == ("failed", 0, "ok")


async def test_a_call_cut_off_before_the_provider_named_it_is_booked_at_its_ceiling(
    pool: asyncpg.Pool, provider: OpenAIProvider, job_id: int
) -> None:
    """A process killed while its request was out leaves its call without a name: nobody can
    find it at the provider, which may have billed it. Once its attempt has let the job go and
    twice a request's time has passed, it is booked at its ceiling, once, and the day's spend
    counts it."""

    async def started(call_number: int, mode: str, ceiling: Decimal | None) -> int:
        call_id: int = await pool.fetchval(
            queries["llm_call_start_if_generating"],
            *(job_id, 1, "generate", "openai", MODEL, call_number, mode, 1, ceiling),
        )
        return call_id

    cut_off = await started(1, "background", Decimal("0.5"))
    of_an_older_release = await started(2, "direct", None)
    await started(3, "batch", Decimal("0.5"))  # its line goes out only with its name
    abandoned = abandoned_calls(pool, provider)
    later = datetime.now(UTC) + timedelta(seconds=2 * REQUEST_SECONDS + 1)

    assert await abandoned.run_once(later) == [], "its attempt still holds the job"
    await pool.execute("UPDATE generation_jobs SET status = 'failed' WHERE id = $1", job_id)
    assert await abandoned.run_once() == [], "a stopped generation may still name it"
    assert sorted(await abandoned.run_once(later)) == [cut_off, of_an_older_release]
    assert await abandoned.run_once(later) == [], "booked once"

    booked = {row["id"]: row for row in await pool.fetch("SELECT * FROM llm_calls")}
    assert {call: booked[call]["cost_usd"] for call in (cut_off, of_an_older_release)} == {
        cut_off: Decimal("0.5"),
        of_an_older_release: CEILING,
    }
    for call in (cut_off, of_an_older_release):
        row = booked[call]
        assert (row["outcome"], row["orphaned"], row["finished_at"] is not None) == (
            "failed",
            True,
            True,
        )
        assert row["error"].startswith("cut off before the provider named it")
    assert await pool.fetchval(queries["budget_today"], None) == Decimal("0.5") + CEILING


async def test_a_generating_job_s_call_is_never_cancelled(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub, job_id: int
) -> None:
    openai_stub.hold()
    task = await interrupted(pool, provider, Ledger(pool, job_id, 1))
    await pool.execute("UPDATE generation_jobs SET status = 'failed' WHERE id <> $1", job_id)
    assert await abandoned_calls(pool, provider).run_once() == []
    openai_stub.let_go()
    assert await task == MISSION
