"""A worker on a database whose sessions break mid-statement (a restart, a failover,
pg_terminate_backend): every job it holds reaches an end or goes back to the queue, a database
blip fails no generation and books no call twice, and no heartbeat vouches for a job whose
end cannot be written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from core.sql import Connection
from generation.finisher import Finished, Store
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from tests.support.dispatching import dispatcher
from tests.support.faults import Faults
from tests.support.generators import Gated, Recording
from tests.support.jobs import enqueue, status_of

# What asyncpg raised when the chaos suite terminated backends mid-statement.
BROKEN = asyncpg.InternalClientError(
    "cannot switch to state 12; another operation (2) is in progress"
)
CLOSED = asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")
# Fragments of the named queries the faults strike.
JOB_END = "SET status = done.status"
HEARTBEAT = "SET heartbeat_at = coalesce"
CLAIM = "generation_claim_within_cap"
CALL_START = "INSERT INTO llm_calls"
RELEASE = "SET status = 'pending', attempt = j.attempt + 1"
PATIENCE = 0.5
FINISHING = 0.5


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
async def faulty_pool(faults: Faults, database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await faults.pool(database_url)
    yield pool
    await pool.close()


async def ledger_rows(pool: asyncpg.Pool, job_id: int) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT attempt, call_number, outcome FROM llm_calls WHERE job_id = $1 ORDER BY id",
        job_id,
    )


async def test_an_end_that_meets_a_broken_session_is_written_once_a_session_works(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    faults.fail(JOB_END, BROKEN)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, Recording())
    await dispatch.run_once()
    assert await dispatch.worker.drain(grace_seconds=10), "the job's end was never written"
    assert (await status_of(faulty_pool, job))["status"] == "completed"
    assert faults.injected == 1


async def test_a_job_whose_end_cannot_be_written_goes_back_to_the_queue(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    faults.fail(JOB_END, RuntimeError("a fault no error list names"), times=None)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, Recording(), patience_seconds=PATIENCE)
    await dispatch.run_once()
    assert await dispatch.worker.drain(grace_seconds=10), "the job stayed held for good"
    row = await status_of(faulty_pool, job)
    assert (row["status"], row["attempt"], row["worker_id"]) == ("pending", 2, None)


async def test_a_heartbeat_stops_vouching_for_a_job_whose_end_hangs(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    hold = faults.hold(JOB_END)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, Recording(), patience_seconds=PATIENCE)
    worker = dispatch.worker
    await dispatch.run_once()
    await hold.reached.wait()
    assert await worker.drain(grace_seconds=10), "a job whose end hangs stayed held"
    assert await worker.heartbeat_once() == []
    row = await status_of(faulty_pool, job)
    assert (row["status"], row["attempt"]) == ("pending", 2)
    hold.release()


async def test_a_stopping_worker_releases_a_job_whose_end_hangs(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    hold = faults.hold(JOB_END)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(
        faulty_pool, Recording(), patience_seconds=60, finishing_seconds=FINISHING
    )
    worker = dispatch.worker
    await dispatch.run_once()
    await hold.reached.wait()
    # The patience is long; the stop gives the end only the stop's own moment to be written.
    assert await asyncio.wait_for(worker.release(), timeout=30) == [job]
    row = await status_of(faulty_pool, job)
    assert (row["status"], row["attempt"], row["worker_id"]) == ("pending", 2, None)
    assert worker.running() == []
    hold.release()


async def test_a_heartbeat_racing_a_completion_reports_no_lost_job(
    faults: Faults, faulty_pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    job = await enqueue(faulty_pool)
    gate = Gated()
    dispatch = dispatcher(faulty_pool, gate)
    await dispatch.run_once()
    await gate.started.acquire()
    hold = faults.hold(HEARTBEAT)
    worker = dispatch.worker
    # The heartbeat takes its list of held jobs, then the job completes before it writes.
    beat = asyncio.create_task(worker.heartbeat_once())
    await hold.reached.wait()
    gate.release()
    assert await worker.drain(grace_seconds=10)
    hold.release()
    assert await beat == []
    assert (await status_of(faulty_pool, job))["status"] == "completed"
    assert "lost its claim" not in caplog.text


async def test_a_woken_claim_that_meets_a_broken_session_claims_nothing_and_goes_on(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    faults.fail(CLAIM, BROKEN)
    job = await enqueue(faulty_pool)
    gate = Gated()
    dispatch = dispatcher(faulty_pool, gate)
    assert await dispatch.claim() == []
    assert [claimed.id for claimed in await dispatch.claim()] == [job]
    gate.release()


async def test_the_jobs_of_a_claim_whose_answer_was_lost_go_back_at_the_next_claim(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    jobs = [await enqueue(faulty_pool, f"user-{index}") for index in range(2)]
    faults.fail(CLAIM, BROKEN, after_running=True)
    gate = Gated()
    dispatch = dispatcher(faulty_pool, gate)
    assert await dispatch.claim() == []
    stranded = [await status_of(faulty_pool, job) for job in jobs]
    assert [(row["status"], row["worker_id"]) for row in stranded] == [
        ("generating", dispatch.worker.id)
    ] * 2, "the claim committed; only its answer was lost"
    claimed = await dispatch.claim()
    assert sorted((job.id, job.attempt) for job in claimed) == [(job, 3) for job in jobs]
    assert sorted(job.id for job in dispatch.worker.running()) == jobs
    gate.release()


async def test_a_model_calls_start_whose_answer_was_lost_is_booked_once(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    faults.fail(CALL_START, BROKEN, after_running=True)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, Recording())
    await dispatch.run_once()
    assert await dispatch.worker.drain(grace_seconds=10)
    assert (await status_of(faulty_pool, job))["status"] == "completed"
    assert [tuple(row) for row in await ledger_rows(faulty_pool, job)] == [(1, 1, "ok")]


class CallsTwice:
    """Two model calls in one attempt: their ledger rows are numbered 1 and 2."""

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        for purpose in ("generate", "sabotage"):
            async with ledger.call(purpose, "test", "test-model"):
                pass
        return Finished(status="completed")


async def test_a_blip_at_a_model_calls_start_is_waited_out(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    faults.fail(CALL_START, CLOSED, times=2)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, CallsTwice())
    await dispatch.run_once()
    assert await dispatch.worker.drain(grace_seconds=10)
    assert (await status_of(faulty_pool, job))["status"] == "completed"
    assert [tuple(row) for row in await ledger_rows(faulty_pool, job)] == [
        (1, 1, "ok"),
        (1, 2, "ok"),
    ]


async def test_an_outage_longer_than_the_patience_gives_the_job_back_instead_of_failing_it(
    faults: Faults, faulty_pool: asyncpg.Pool
) -> None:
    faults.fail(CALL_START, CLOSED, times=None)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, Recording(), patience_seconds=PATIENCE)
    await dispatch.run_once()
    assert await dispatch.worker.drain(grace_seconds=10)
    row = await status_of(faulty_pool, job)
    assert (row["status"], row["attempt"], row["error"]) == ("pending", 2, None)
    assert await ledger_rows(faulty_pool, job) == []


class StoresARow:
    """Ends with a store that runs a statement in the job's final transaction."""

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Store:
        async with ledger.call("generate", "test", "test-model"):
            pass

        async def store(connection: Connection) -> Finished:
            await connection.fetchval("SELECT $1::int AS stored", job.id)
            return Finished(status="completed")

        return store


async def test_a_session_broken_during_a_store_writes_the_batch_again(
    faults: Faults, faulty_pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    faults.fail("AS stored", CLOSED)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, StoresARow())
    await dispatch.run_once()
    assert await dispatch.worker.drain(grace_seconds=10)
    assert (await status_of(faulty_pool, job))["status"] == "completed"
    assert "storing the result" not in caplog.text


class EndsAtOnceThenGated(Gated):
    """The first attempt ends at once; later ones wait for `release()`."""

    async def work(self, job: ClaimedJob) -> None:
        if job.attempt > 1:
            await super().work(job)


async def test_a_job_claimed_again_while_its_old_attempt_gives_it_back_stays_held(
    faults: Faults, faulty_pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    faults.fail(JOB_END, RuntimeError("a fault no error list names"))
    given_back = faults.hold(RELEASE, after_running=True)
    job = await enqueue(faulty_pool)
    generator = EndsAtOnceThenGated()
    dispatch = dispatcher(faulty_pool, generator, patience_seconds=PATIENCE)
    worker = dispatch.worker
    await dispatch.run_once()
    (first,) = [task for task in asyncio.all_tasks() if task.get_name() == f"job-{job}-attempt-1"]
    # The give-back committed; before the old attempt's task hears so, this worker claims the
    # job again.
    await given_back.reached.wait()
    assert [claimed.attempt for claimed in await dispatch.claim()] == [3]
    await generator.started.acquire()
    given_back.release()
    await asyncio.wait([first], timeout=10)
    assert first.done()
    assert first.exception() is None
    assert [(held.id, held.attempt) for held in worker.running()] == [(job, 3)]
    assert await worker.heartbeat_once() == [], "the new attempt is held and heartbeated"
    row = await status_of(faulty_pool, job)
    assert (row["status"], row["attempt"], row["worker_id"]) == ("generating", 3, worker.id)
    generator.release()
    assert await worker.drain(grace_seconds=10)
    assert (await status_of(faulty_pool, job))["status"] == "completed"
    assert worker.free_slots() == worker.capacity
    assert "lost its claim" not in caplog.text


class LosesTheDatabase(Recording):
    async def work(self, job: ClaimedJob) -> None:
        raise CLOSED


async def test_a_heartbeat_racing_a_give_back_reports_no_lost_job(
    faults: Faults, faulty_pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    given_back = faults.hold(RELEASE, after_running=True)
    job = await enqueue(faulty_pool)
    dispatch = dispatcher(faulty_pool, LosesTheDatabase())
    worker = dispatch.worker
    await dispatch.run_once()
    # The give-back committed; a heartbeat runs before the worker hears so.
    await given_back.reached.wait()
    assert await worker.heartbeat_once() == []
    given_back.release()
    assert await worker.drain(grace_seconds=10)
    row = await status_of(faulty_pool, job)
    assert (row["status"], row["attempt"]) == ("pending", 2)
    assert "lost its claim" not in caplog.text
