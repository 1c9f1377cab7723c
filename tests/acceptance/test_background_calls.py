"""Model calls that outlive their worker, with real `warmpool worker` processes and the real
SDK against the stub's Responses API: a generation in flight at a deploy (SIGTERM with a short
grace), at a crash (SIGKILL) or through a Postgres restart ends as one completed job whose
ledger holds exactly one billed call per purpose and try, the later attempt having taken the
earlier one's call over (resumed_calls >= 1), and the stub created no more responses than the
ledger holds."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from core.sql import Queries
from tests.support.jobs import enqueue, status_of
from tests.support.openai_stub import COPY_ANSWERS, OpenAIStub
from tests.support.polling import eventually
from tests.support.private_postgres import PrivatePostgres
from tests.support.server import QUIET_MAP
from tests.support.stub_workers import StubWorkers

pytestmark = pytest.mark.slow
queries = Queries("generation")
DOMAIN = "marketing-copy"


@pytest.fixture
def stub(openai_stub: OpenAIStub) -> OpenAIStub:
    """The stub, answering missions without code, as marketing-copy asks."""
    openai_stub.answers.update(COPY_ANSWERS)
    return openai_stub


@pytest.fixture
def workers(stub: OpenAIStub, tmp_path: Path) -> Iterator[StubWorkers]:
    started = StubWorkers(stub, tmp_path, QUIET_MAP)
    yield started
    started.stop_all()


async def open_call(pool: asyncpg.Pool, job_id: int, purpose: str) -> bool:
    """The call's response id is on its row and the call has not ended: a worker waits on it."""
    return bool(
        await pool.fetchval(
            "SELECT count(*) FROM llm_calls WHERE job_id = $1 AND purpose = $2 "
            "AND provider_id IS NOT NULL AND finished_at IS NULL",
            job_id,
            purpose,
        )
    )


async def completed(pool: asyncpg.Pool, job_id: int) -> bool:
    row = await status_of(pool, job_id)
    assert row["status"] in ("pending", "generating", "completed"), dict(row)
    return bool(row["status"] == "completed")


async def assert_paid_once(pool: asyncpg.Pool, job_id: int, stub: OpenAIStub) -> int:
    """One billed call per purpose and try, as many responses created as ledger rows; the job's
    resumed_calls."""
    rows = await pool.fetch(
        "SELECT purpose, try_number, mode, outcome, cost_usd, provider_id FROM llm_calls "
        "WHERE job_id = $1 ORDER BY id",
        job_id,
    )
    billed = [(row["purpose"], row["try_number"]) for row in rows if row["cost_usd"] > 0]
    assert billed == [("generate", 1), ("sabotage", 1)], [dict(row) for row in rows]
    assert {(row["mode"], row["outcome"]) for row in rows} == {("background", "ok")}
    created = stub.created()
    assert len(created) <= len(rows) == 2
    assert sorted(each.id for each in created) == sorted(row["provider_id"] for row in rows)
    job = await pool.fetchrow(queries["job_view"], job_id, None)
    assert job is not None
    resumed: int = job["resumed_calls"]
    return resumed


async def test_a_call_in_flight_at_a_deploy_is_taken_over_by_the_next_worker(
    pool: asyncpg.Pool, database_url: str, stub: OpenAIStub, workers: StubWorkers
) -> None:
    stub.hold()
    first = await workers.start(database_url, "deploy-a")
    job = await enqueue(pool, None, domain=DOMAIN)
    await eventually(lambda: open_call(pool, job, "generate"), 30, "the mission's response")

    assert first.stop(signal.SIGTERM) == 0, first.output()
    assert "released job" in first.output()
    assert (await status_of(pool, job))["status"] == "pending"
    assert await open_call(pool, job, "generate"), "the released call stays open"

    await workers.start(database_url, "deploy-b")
    stub.let_go()
    await eventually(lambda: completed(pool, job), 60, "the job to complete")
    assert await assert_paid_once(pool, job, stub) == 1


async def test_a_call_in_flight_at_a_crash_is_taken_over_by_the_dead_worker_successor(
    pool: asyncpg.Pool, database_url: str, stub: OpenAIStub, workers: StubWorkers
) -> None:
    stub.hold("sabotage")
    first = await workers.start(database_url, "crash")
    job = await enqueue(pool, None, domain=DOMAIN)
    await eventually(lambda: open_call(pool, job, "sabotage"), 30, "the sabotage's response")

    first.stop(signal.SIGKILL)
    await workers.start(database_url, "crash")
    stub.let_go()
    await eventually(lambda: completed(pool, job), 60, "the job to complete")
    # The mission's answer was read again and the sabotage's awaited: neither paid twice.
    assert await assert_paid_once(pool, job, stub) == 2


async def test_a_call_in_flight_through_a_postgres_restart_is_paid_once(
    private_postgres: PrivatePostgres, stub: OpenAIStub, workers: StubWorkers
) -> None:
    if not (private_postgres.data / "postmaster.pid").exists():
        private_postgres.start()
    url = await private_postgres.fresh_database()
    pool = await asyncpg.create_pool(url, min_size=0, max_size=2)
    try:
        stub.hold()
        await workers.start(url, "outage-a")
        job = await enqueue(pool, None, domain=DOMAIN)
        await eventually(lambda: open_call(pool, job, "generate"), 30, "the mission's response")
        await pool.expire_connections()

        private_postgres.stop()
        stub.let_go()  # the answer comes while the database is away
        private_postgres.start()
        await eventually(lambda: completed(pool, job), 60, "the job to complete")
        await assert_paid_once(pool, job, stub)

        # Then a deploy while the database is away: the next worker takes the call over.
        stub.reset()
        stub.answers.update(COPY_ANSWERS)
        # Another mission: the same one again would be discarded as a duplicate.
        page = {"path": "product-page.md", "content": "# Ember Two\n\nHolds 1.7 litres.\n"}
        stub.answers["mission"] = {**COPY_ANSWERS["mission"], "gold_files": [page]}
        stub.hold()
        second = await enqueue(pool, None, domain=DOMAIN)
        await eventually(lambda: open_call(pool, second, "generate"), 30, "the next response")
        await pool.expire_connections()
        private_postgres.stop()
        workers.started[0].stop(signal.SIGTERM)
        private_postgres.start()
        await workers.start(url, "outage-b")
        stub.let_go()
        await eventually(lambda: completed(pool, second), 60, "the next job to complete")
        assert await assert_paid_once(pool, second, stub) == 1
    finally:
        await pool.close()


async def test_a_frozen_worker_that_wakes_up_neither_takes_over_nor_settles_the_call(
    pool: asyncpg.Pool, database_url: str, stub: OpenAIStub, workers: StubWorkers
) -> None:
    stub.hold()
    frozen = await workers.start(database_url, "frozen")
    job = await enqueue(pool, None, domain=DOMAIN)
    await eventually(lambda: open_call(pool, job, "generate"), 30, "the mission's response")
    frozen.popen.send_signal(signal.SIGSTOP)
    try:
        # Its heartbeats stop: the other worker's sweeper gives the job back, and claims it.
        await workers.start(database_url, "awake")
        await eventually(
            lambda: pool.fetchval(
                "SELECT resumed_by_attempt IS NOT NULL FROM llm_calls WHERE job_id = $1", job
            ),
            60,
            "the other worker to take the call over",
        )
    finally:
        frozen.popen.send_signal(signal.SIGCONT)
    stub.let_go()
    await eventually(lambda: completed(pool, job), 60, "the job to complete")
    assert await assert_paid_once(pool, job, stub) == 1
    row = await pool.fetchrow(
        "SELECT attempt, resumed_by_attempt, orphaned FROM llm_calls "
        "WHERE job_id = $1 AND purpose = 'generate'",
        job,
    )
    final = await status_of(pool, job)
    assert row is not None
    assert (row["attempt"], row["resumed_by_attempt"], row["orphaned"]) == (
        1,
        final["attempt"],
        False,
    )

    async def let_go() -> bool:
        return "lost its claim" in frozen.output()

    await eventually(let_go, 30, "the woken worker to let the job go")
