"""The Batch API lane through the real SDK against the stub's files and batches: replenish jobs'
model calls go out as lines of batches, their jobs wait off every slot with their reservations
held, and each call is settled once at the batch price by the job's next attempt; interactive
work never goes through a batch; a batch that expires or fails lines leaves every job completed,
retried or failed with a reason, and no reservation behind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import asyncpg
import openai
import pytest

from core import domains
from core.sql import Queries
from generation import budget as budgets
from generation.abandoned import AbandonedCalls
from generation.budget import Budget
from generation.ledger import Ledger
from generation.openai import prices
from generation.openai.batch_calls import LINE_TRIES
from generation.openai.provider import OpenAIProvider
from generation.provider import CallDeferred
from generation.retention import Retention
from tests.support.batches import MODEL, BatchRig, stub_provider
from tests.support.jobs import enqueue
from tests.support.openai_stub import COPY_ANSWERS, USAGE, BatchLine, OpenAIStub
from tests.support.polling import eventually
from tests.support.server import ROOT

queries = Queries("generation")
DOMAIN = "marketing-copy"
DOMAINS = domains.load(ROOT / "domain_map.yaml").domains
RATES = prices.load().batch_for_model(MODEL)
SYNCHRONOUS = prices.load().for_model(MODEL)


@pytest.fixture
async def provider(openai_stub: OpenAIStub) -> AsyncIterator[OpenAIProvider]:
    openai_stub.answers.update(COPY_ANSWERS)
    openai_stub.distinct = True
    provider = stub_provider(openai_stub)
    yield provider
    await provider.close()


async def ledger(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return await pool.fetch(
        """
        SELECT c.job_id, j.lane, c.purpose, c.try_number, c.mode, c.outcome, c.cost_usd,
               c.input_tokens, c.output_tokens, c.resumed, c.finished_at IS NOT NULL AS finished
        FROM llm_calls c JOIN generation_jobs j ON j.id = c.job_id
        ORDER BY c.id
        """
    )


async def statuses(pool: asyncpg.Pool) -> dict[int, tuple[str, str | None]]:
    rows = await pool.fetch("SELECT id, status, error FROM generation_jobs ORDER BY id")
    return {row["id"]: (row["status"], row["error"]) for row in rows}


def batch_cost(purpose: str) -> Decimal:
    return RATES.cost(*USAGE["mission" if purpose == "generate" else "sabotage"])


async def test_fifty_replenish_jobs_go_out_in_batches_and_settle_at_the_batch_price(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    budget = Budget(
        daily_usd=Decimal(1000),
        job_reservation_usd=provider.worst_case_cost_usd(2),
        interactive_reserve_usd=Decimal(0),
    )
    rig = BatchRig(pool, provider, budget=budget, batch_wait_seconds=3600)
    replenish = [await enqueue(pool, None, domain=DOMAIN) for _ in range(50)]
    interactive = [await enqueue(pool, f"user-{n}", domain=DOMAIN) for n in range(2)]

    assert await rig.generate() == 52
    # Every replenish job wrote its mission call as a line and waits for it, holding no slot
    # and no place under the cap, its reservation held; the interactive ones are done.
    waiting = await pool.fetch(
        "SELECT id FROM generation_jobs WHERE status = 'pending' AND waiting_for_call IS NOT NULL"
    )
    assert sorted(row["id"] for row in waiting) == replenish
    assert await rig.generate() == 0, "a job waiting for its batch was claimed"
    status = await budgets.status(pool, budget)
    assert status.reserved_usd == pytest.approx(50 * float(budget.job_reservation_usd))

    await rig.until_drained()

    assert set((await statuses(pool)).values()) <= {("completed", None), ("awaiting_review", None)}
    assert {(await statuses(pool))[job][0] for job in replenish} == {"completed"}
    # Two batches of 50 lines: the missions, then the bugs.
    assert [len(batch.lines) for batch in openai_stub.batches.values()] == [50, 50]
    calls = await ledger(pool)
    batched = [call for call in calls if call["lane"] == "replenish"]
    assert {call["mode"] for call in batched} == {"batch"}
    assert {call["mode"] for call in calls if call["lane"] == "interactive"} == {"background"}
    # Each job paid once per purpose and try, at the batch price, settled: nothing open.
    paid = [(call["job_id"], call["purpose"], call["try_number"]) for call in batched]
    assert sorted(paid) == sorted({*paid})
    assert len(paid) == 100
    for call in batched:
        assert (call["outcome"], call["finished"]) == ("ok", True)
        assert call["cost_usd"] == batch_cost(call["purpose"])
        assert call["resumed"] == 0, "reading a batch answer is no takeover"
    assert batch_cost("generate") * 2 == SYNCHRONOUS.cost(*USAGE["mission"])
    # The provider's count is the ledger's: 100 batch lines, 4 interactive responses.
    assert len(openai_stub.batch_generated()) == len(batched)
    assert len(openai_stub.created()) == len(calls) - len(batched) == 4
    assert all(body_job not in replenish for body_job in _jobs_of(openai_stub))
    status = await budgets.status(pool, budget)
    assert status.reserved_usd == 0
    assert Decimal(str(status.spent_today_usd)) == sum(call["cost_usd"] for call in calls)
    assert interactive


def _jobs_of(stub: OpenAIStub) -> set[int]:
    """The jobs the stub's background responses were created for."""
    return {int(each.received.body["metadata"]["job_id"]) for each in stub.created()}


async def billed(pool: asyncpg.Pool) -> list[tuple[int, str, int]]:
    """(job, purpose, try) of every call the provider billed, as the ledger books them."""
    rows = await pool.fetch(
        "SELECT job_id, purpose, try_number FROM llm_calls WHERE cost_usd > 0 ORDER BY id"
    )
    return [(row["job_id"], row["purpose"], row["try_number"]) for row in rows]


async def nothing_left_behind(pool: asyncpg.Pool, budget: Budget) -> None:
    """No job waits, no call is open, no reservation is held, no line is under way."""
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM generation_jobs WHERE waiting_for_call IS NOT NULL AND status = 'pending'"
        )
        == 0
    )
    assert await pool.fetchval("SELECT count(*) FROM llm_calls WHERE finished_at IS NULL") == 0
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM llm_batch_lines WHERE status IN ('queued', 'batched')"
        )
        == 0
    )
    assert (await budgets.status(pool, budget)).reserved_usd == 0


def a_budget(provider: OpenAIProvider) -> Budget:
    return Budget(
        daily_usd=Decimal(1000),
        job_reservation_usd=provider.worst_case_cost_usd(2),
        interactive_reserve_usd=Decimal(0),
    )


async def pending(pool: asyncpg.Pool, job_id: int) -> bool:
    return bool(
        await pool.fetchval("SELECT status = 'pending' FROM generation_jobs WHERE id = $1", job_id)
    )


async def test_a_deploy_while_the_provider_creates_a_response_leaves_it_named_for_the_next(
    pool: asyncpg.Pool, openai_stub: OpenAIStub
) -> None:
    """The worker gives the job back while its response is being created: the stopped
    generation waits for the provider's id (a heartbeat meanwhile does not take it for lost)
    and stores it before the release returns, so the next attempt takes the call over instead
    of paying for it again."""
    openai_stub.answers.update(COPY_ANSWERS)
    model = stub_provider(openai_stub, calls="background", batch="off")
    openai_stub.delay_seconds = 1.0
    openai_stub.plan("slow")
    try:
        job = await enqueue(pool, None, domain=DOMAIN)
        stopping = BatchRig(pool, model)
        assert await stopping.dispatcher.run_once()
        await eventually(lambda: asyncio.sleep(0, openai_stub.received), 10, "the creation")
        await stopping.dispatcher.stop()
        releasing = asyncio.create_task(stopping.worker.release())
        await eventually(lambda: pending(pool, job), 10, "the job given back")
        assert await stopping.worker.heartbeat_once() == [], "given back, so not lost"
        assert await releasing == [job]

        [call] = await pool.fetch("SELECT provider_id, finished_at FROM llm_calls")
        assert (call["provider_id"], call["finished_at"]) == (openai_stub.created()[0].id, None)
        await BatchRig(pool, model).until_drained()
    finally:
        await model.close()
    assert (await statuses(pool))[job] == ("completed", None)
    assert [each.received.schema_name for each in openai_stub.created()] == ["mission", "sabotage"]
    assert sorted(await billed(pool)) == [(job, "generate", 1), (job, "sabotage", 1)]


async def test_while_another_process_runs_a_batch_pass_a_pass_does_nothing(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    rig = BatchRig(pool, provider, budget=a_budget(provider))
    for _ in range(3):
        await enqueue(pool, None, domain=DOMAIN)
    assert await rig.generate() == 3, "each job wrote its line and waits for it"

    async with pool.acquire() as other, other.transaction():
        assert await other.fetchval(queries["batch_leader_try_lock"]), "its pass under way"
        skipped = await rig.lane.run_once()
        assert (skipped.ran, skipped.submitted) == (False, [])
        assert openai_stub.batches == {}, "nothing sent, nothing polled"
    done = await rig.lane.run_once()
    assert (done.ran, len(done.submitted)) == (True, 1)
    assert [len(batch.lines) for batch in openai_stub.batches.values()] == [3]


async def test_an_expired_batch_writes_its_unanswered_lines_again_and_pays_each_call_once(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    budget = a_budget(provider)
    rig = BatchRig(pool, provider, batch_size=4, budget=budget)
    jobs = [await enqueue(pool, None, domain=DOMAIN) for _ in range(4)]
    openai_stub.plan_batches("expired")
    openai_stub.answered_before_expiry = 2

    await rig.until_drained()

    assert {(await statuses(pool))[job] for job in jobs} == {("completed", None)}
    first = next(iter(openai_stub.batches.values()))
    assert [line.error_code for line in first.lines] == [
        None,
        None,
        "batch_expired",
        "batch_expired",
    ]
    expired = await pool.fetch(
        "SELECT job_id, outcome, cost_usd, error FROM llm_calls WHERE outcome <> 'ok' ORDER BY id"
    )
    assert [(row["outcome"], row["cost_usd"]) for row in expired] == [("unbilled", 0)] * 2
    assert all("batch_expired" in row["error"] for row in expired)
    paid = await billed(pool)
    assert len(paid) == len({*paid}) == 8, "each job paid once for its mission and its bug"
    assert len(openai_stub.batch_generated()) == len(paid)
    await nothing_left_behind(pool, budget)


async def test_a_line_that_keeps_failing_fails_its_job_with_the_reason_and_the_rest_complete(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    budget = a_budget(provider)
    rig = BatchRig(pool, provider, batch_size=3, budget=budget)
    jobs = [await enqueue(pool, None, domain=DOMAIN) for _ in range(3)]
    doomed = f"job-{jobs[1]}-"
    openai_stub.fail_lines(
        lambda custom_id: "server_error" if custom_id.startswith(doomed) else None
    )

    await rig.until_drained()

    ended = await statuses(pool)
    assert ended[jobs[0]] == ended[jobs[2]] == ("completed", None)
    status, error = ended[jobs[1]]
    assert status == "failed"
    assert error is not None
    assert "answered 500 for the line" in error
    assert f"gave up after {LINE_TRIES} batch lines" in error
    tried = [line.custom_id for line in _lines(openai_stub) if line.custom_id.startswith(doomed)]
    assert len(set(tried)) == len(tried) == LINE_TRIES
    paid = await billed(pool)
    assert all(job != jobs[1] for job, _, _ in paid)
    assert len(paid) == len({*paid}) == len(openai_stub.batch_generated()) == 4
    await nothing_left_behind(pool, budget)


async def test_a_batch_the_provider_refuses_fails_its_jobs_with_the_reason_and_bills_nothing(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    budget = a_budget(provider)
    rig = BatchRig(pool, provider, batch_size=2, budget=budget)
    jobs = [await enqueue(pool, None, domain=DOMAIN) for _ in range(2)]
    openai_stub.refusing_batches = "the input file's lines ask for a model batches do not serve"

    await rig.until_drained()

    for status, error in (await statuses(pool)).values():
        assert status == "failed"
        assert error is not None
        assert "the model API refused the batch (400" in error
        assert "a model batches do not serve" in error
    assert len(await statuses(pool)) == len(jobs)
    assert await billed(pool) == []
    assert openai_stub.batch_generated() == []
    await nothing_left_behind(pool, budget)


async def test_a_job_cancelled_while_it_waits_never_sends_its_line_or_books_its_answer_once(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    budget = a_budget(provider)
    rig = BatchRig(pool, provider, batch_size=2, batch_wait_seconds=3600, budget=budget)
    jobs = {await enqueue(pool, None, domain=DOMAIN) for _ in range(3)}
    assert await rig.generate() == 3
    openai_stub.hold_batches()
    await rig.lane.run_once()  # a batch of two lines goes out; the third line waits to fill one
    [sent] = openai_stub.batches.values()
    sent_jobs = {int(line.custom_id.split("-")[1]) for line in sent.lines}
    [queued] = jobs - sent_jobs
    batched = min(sent_jobs)
    for job in (queued, batched):
        assert await pool.fetchval(queries["job_cancel_if_pending"], job) == job
    abandoned = AbandonedCalls(
        pool,
        provider.background.abandon,
        budget=None,
        abandon_line=rig.lane.abandon,
        request_seconds=10,
        call_ceiling_usd=Decimal(0),
    )

    assert len(await abandoned.run_once()) == 1, "the line not sent is cancelled at once"
    openai_stub.let_batches_go()
    rig.lane = provider.batch_lane(pool, size=2, wait_seconds=0)
    await rig.until_drained()
    assert len(await abandoned.run_once()) == 1, "the line sent is booked once answered"

    calls = {row["job_id"]: row for row in await pool.fetch("SELECT * FROM llm_calls")}
    assert (calls[queued]["outcome"], calls[queued]["cost_usd"]) == ("unbilled", 0)
    assert calls[batched]["orphaned"]
    assert calls[batched]["cost_usd"] == batch_cost("generate")
    assert len(openai_stub.batch_generated()) == len(await billed(pool)) == 3
    assert all(not line.custom_id.startswith(f"job-{queued}-") for line in _lines(openai_stub))
    await nothing_left_behind(pool, budget)


def _lines(stub: OpenAIStub) -> list[BatchLine]:
    return [line for batch in stub.batches.values() for line in batch.lines]


async def test_a_job_whose_worker_died_after_writing_its_line_waits_for_that_same_line(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    rig = BatchRig(pool, provider)
    job = await enqueue(pool, None, domain=DOMAIN)
    [attempt] = [
        row["attempt"]
        for row in await pool.fetch(
            queries["job_claim_within_cap"], 1, 9, 9, "dead:host:1", None, None, 0, 0, None
        )
    ]
    with pytest.raises(CallDeferred):
        await provider.write_mission(
            DOMAINS[DOMAIN], seed=job, ledger=Ledger(pool, job, attempt, lane="replenish")
        )
    # Its process died before giving the job back: the sweeper hands the call to a new attempt.
    swept = await rig.sweeper.run_once(datetime.now(UTC) + timedelta(minutes=2))
    assert (swept.requeued, swept.stale) == ([job], [])

    await rig.until_drained()

    assert (await statuses(pool))[job] == ("completed", None)
    [mission_line] = [line for line in _lines(openai_stub) if "-generate-" in line.custom_id]
    assert mission_line.custom_id == f"job-{job}-attempt-{attempt}-generate-try-1"
    paid = await billed(pool)
    assert paid == [(job, "generate", 1), (job, "sabotage", 1)]
    assert len(openai_stub.batch_generated()) == 2


async def test_a_batch_created_by_a_pass_that_died_before_recording_it_is_found_not_sent_again(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    rig = BatchRig(pool, provider)
    job = await enqueue(pool, None, domain=DOMAIN)
    assert await rig.generate() == 1
    # A pass took the line into a batch and created it at the provider, then died.
    batch_id = await pool.fetchval(queries["batch_insert_of_due_lines"], 50, timedelta(0), None)
    [line] = await pool.fetch(queries["batch_lines_of_batch"], batch_id)
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=openai_stub.base_url)
    request = {
        "custom_id": line["custom_id"],
        "method": "POST",
        "url": "/v1/responses",
        "body": line["request"],
    }
    uploaded = await client.files.create(
        file=("lines.jsonl", json.dumps(request).encode()), purpose="batch"
    )
    created = await client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/responses",
        completion_window="24h",
        metadata={"warmpool_batch": str(batch_id)},
    )
    await client.close()

    await rig.until_drained()

    assert (await statuses(pool))[job] == ("completed", None)
    ended = await pool.fetch(
        "SELECT provider_batch_id FROM llm_batches WHERE id = $1 AND status = 'ended'", batch_id
    )
    assert [row["provider_batch_id"] for row in ended] == [created.id]
    assert len(openai_stub.batches) == 2, "the mission's batch, found again, and the bug's"
    assert len(openai_stub.batch_generated()) == len(await billed(pool)) == 2


async def test_retention_deletes_the_lines_and_batches_of_ended_jobs_and_keeps_the_ledger(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    rig = BatchRig(pool, provider)
    done = [await enqueue(pool, None, domain=DOMAIN) for _ in range(2)]
    await rig.until_drained()
    waiting = await enqueue(pool, None, domain=DOMAIN)
    assert await rig.generate() == 1
    openai_stub.hold_batches()
    await rig.lane.run_once()
    week = timedelta(days=7)
    later = datetime.now(UTC) + week + timedelta(minutes=1)

    await Retention(pool, keep_for=week).run_once(later)

    lines = await pool.fetch("SELECT job_id, status FROM llm_batch_lines")
    assert [(row["job_id"], row["status"]) for row in lines] == [(waiting, "batched")]
    assert await pool.fetchval("SELECT count(*) FROM llm_batches") == 1, "the open one stays"
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM llm_calls WHERE job_id = ANY($1) AND cost_usd > 0", done
        )
        == 4
    ), "the ledger keeps every call"


async def test_a_batch_the_provider_no_longer_holds_has_its_lines_written_again(
    pool: asyncpg.Pool, provider: OpenAIProvider, openai_stub: OpenAIStub
) -> None:
    rig = BatchRig(pool, provider)
    job = await enqueue(pool, None, domain=DOMAIN)
    assert await rig.generate() == 1
    openai_stub.hold_batches()
    await rig.lane.run_once()
    [lost] = openai_stub.batches
    del openai_stub.batches[lost]
    openai_stub.let_batches_go()

    await rig.until_drained()

    assert (await statuses(pool))[job] == ("completed", None)
    errors = await pool.fetch("SELECT error FROM llm_calls WHERE outcome = 'unbilled'")
    assert [row["error"] for row in errors] == [f"the model API no longer holds batch {lost}"]
    assert len(openai_stub.batch_generated()) == len(await billed(pool)) == 2
