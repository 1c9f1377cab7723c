"""The Batch API lane with real `warmpool worker` processes and the real SDK against the stub's
files and batches: replenish jobs wait for their batch lines off every worker, so a worker
killed meanwhile loses nothing, and its successor finishes every job, each call paid once, the
stub having answered no more lines than the ledger bills."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.support.jobs import enqueue
from tests.support.openai_stub import COPY_ANSWERS, OpenAIStub
from tests.support.polling import eventually
from tests.support.server import QUIET_MAP
from tests.support.stub_workers import StubWorkers

pytestmark = pytest.mark.slow
DOMAIN = "marketing-copy"


@pytest.fixture
def stub(openai_stub: OpenAIStub) -> OpenAIStub:
    openai_stub.answers.update(COPY_ANSWERS)
    openai_stub.distinct = True
    return openai_stub


@pytest.fixture
def workers(stub: OpenAIStub, tmp_path: Path) -> Iterator[StubWorkers]:
    batching = {"WARMPOOL_BATCH": "replenish", "WARMPOOL_BATCH_WAIT_SECONDS": "0.1"}
    started = StubWorkers(stub, tmp_path, QUIET_MAP, batching)
    yield started
    started.stop_all()


async def waiting_for_sent_lines(pool: asyncpg.Pool, jobs: list[int], stub: OpenAIStub) -> bool:
    """Every job waits for a line that has gone out in a batch."""
    waiting = await pool.fetchval(
        """
        SELECT count(*) FROM generation_jobs j
        JOIN llm_batch_lines l ON l.call_id = j.waiting_for_call
        WHERE j.id = ANY($1) AND j.status = 'pending' AND l.status = 'batched'
        """,
        jobs,
    )
    return waiting == len(jobs) and bool(stub.batches)


async def all_completed(pool: asyncpg.Pool, jobs: list[int]) -> bool:
    rows = await pool.fetch("SELECT status, error FROM generation_jobs WHERE id = ANY($1)", jobs)
    assert all(row["status"] in ("pending", "generating", "completed") for row in rows), rows
    return all(row["status"] == "completed" for row in rows)


async def test_a_worker_killed_while_its_jobs_wait_for_a_batch_loses_nothing_and_pays_once(
    pool: asyncpg.Pool, database_url: str, stub: OpenAIStub, workers: StubWorkers
) -> None:
    stub.hold_batches()
    first = await workers.start(database_url, "batcher")
    jobs = [await enqueue(pool, None, domain=DOMAIN) for _ in range(3)]
    await eventually(lambda: waiting_for_sent_lines(pool, jobs, stub), 30, "the mission lines")
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE status = 'generating'") == 0
    )

    first.stop(signal.SIGKILL)
    await workers.start(database_url, "batcher")
    stub.let_batches_go()
    await eventually(lambda: all_completed(pool, jobs), 60, "the jobs to complete")

    rows = await pool.fetch(
        "SELECT job_id, purpose, try_number, mode, outcome, cost_usd, provider_id "
        "FROM llm_calls ORDER BY id"
    )
    for job in jobs:
        calls = [row for row in rows if row["job_id"] == job]
        assert [(row["purpose"], row["try_number"]) for row in calls] == [
            ("generate", 1),
            ("sabotage", 1),
        ], calls
        assert {(row["mode"], row["outcome"]) for row in calls} == {("batch", "ok")}
        assert all(row["cost_usd"] > 0 for row in calls)
    answered = stub.batch_generated()
    assert len(answered) == len(rows) == 6
    assert sorted(line.custom_id for line in answered) == sorted(row["provider_id"] for row in rows)
    assert stub.created() == [], "a replenish call went out as a background response"
