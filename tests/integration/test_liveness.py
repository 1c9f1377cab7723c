"""Heartbeats, the sweeper against live workers, zombies, crashes and restarts."""

import asyncio
import os
from datetime import UTC, datetime, timedelta

import asyncpg

from core.sql import Queries
from generation.finisher import Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.sweeper import Sweeper
from generation.worker import Worker
from tests.support.dispatching import MINUTE, PID_MAX, dispatcher
from tests.support.generators import Crashing, Gated, Recording
from tests.support.jobs import enqueue, status_of
from tests.support.polling import eventually

queries = Queries("generation")

# Past the heartbeat timeout (a minute here), not past the hard limit.
LATER = timedelta(minutes=2)


def sweeper(pool: asyncpg.Pool) -> Sweeper:
    return Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )


async def settled(worker: Worker) -> None:
    assert await worker.drain(grace_seconds=10)


async def ledger_rows(pool: asyncpg.Pool, job_id: int) -> list[asyncpg.Record]:
    return await pool.fetch(
        "SELECT attempt, outcome, orphaned, error FROM llm_calls WHERE job_id = $1 ORDER BY id",
        job_id,
    )


async def test_a_completion_that_commits_first_beats_the_sweeper(pool: asyncpg.Pool) -> None:
    job = await enqueue(pool)
    gate = Gated()
    dispatch = dispatcher(pool, gate)
    assert len(await dispatch.run_once()) == 1
    gate.release()
    await settled(dispatch.worker)
    assert (await status_of(pool, job))["status"] == "completed"
    swept = await sweeper(pool).run_once(datetime.now(UTC) + LATER)
    assert swept.stale == []
    assert (await status_of(pool, job))["status"] == "completed"


async def test_a_sweep_that_commits_first_beats_the_completion(pool: asyncpg.Pool) -> None:
    job = await enqueue(pool)
    gate = Gated()
    dispatch = dispatcher(pool, gate)
    await dispatch.run_once()
    await gate.started.acquire()
    swept = await sweeper(pool).run_once(datetime.now(UTC) + LATER)
    assert swept.stale == [job]
    gate.release()
    await settled(dispatch.worker)
    row = await status_of(pool, job)
    assert row["status"] == "failed"
    assert "stopped heartbeating" in row["error"]
    [call] = await ledger_rows(pool, job)
    assert call["orphaned"], "the call that finished after the sweep is marked orphaned"


class TwoCalls(Recording):
    """Makes one model call, waits for the test, then tries a second one."""

    def __init__(self) -> None:
        super().__init__()
        self.between = asyncio.Event()
        self.go_on = asyncio.Event()
        self.second_started = False

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        async with ledger.call("generate", "test", "test-model"):
            pass
        self.between.set()
        await self.go_on.wait()
        async with ledger.call("sabotage", "test", "test-model"):
            self.second_started = True
        raise AssertionError("a zombie must not get here")


async def test_a_zombie_worker_changes_nothing_and_starts_no_further_model_call(
    pool: asyncpg.Pool,
) -> None:
    job = await enqueue(pool)
    zombie = TwoCalls()
    dispatch = dispatcher(pool, zombie)
    await dispatch.run_once()
    await zombie.between.wait()
    await sweeper(pool).run_once(datetime.now(UTC) + LATER)
    before = await status_of(pool, job)
    zombie.go_on.set()
    await settled(dispatch.worker)
    assert not zombie.second_started
    assert await status_of(pool, job) == before
    assert [row["outcome"] for row in await ledger_rows(pool, job)] == ["ok"]


async def test_no_model_call_starts_while_a_sweep_of_its_job_is_under_way(
    pool: asyncpg.Pool,
) -> None:
    job = await enqueue(pool)
    zombie = TwoCalls()
    dispatch = dispatcher(pool, zombie)
    await dispatch.run_once()
    await zombie.between.wait()
    async with pool.acquire() as sweeping:
        transaction = sweeping.transaction()
        await transaction.start()
        swept = await sweeping.fetch(
            queries["jobs_fail_if_stale"], MINUTE, 10 * MINUTE, datetime.now(UTC) + LATER
        )
        assert [row["id"] for row in swept] == [job]
        # The sweep is not committed: the second call's start must wait for it, then see it.
        zombie.go_on.set()

        async def call_start_waits() -> bool:
            return bool(
                await pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%INSERT INTO llm_calls%'"
                )
            )

        await eventually(call_start_waits, 10, "the call's start to wait for the sweep")
        await transaction.commit()
    await settled(dispatch.worker)
    assert not zombie.second_started
    assert [row["outcome"] for row in await ledger_rows(pool, job)] == ["ok"]


async def test_a_heartbeat_finds_a_lost_job_and_stops_its_generation(pool: asyncpg.Pool) -> None:
    job = await enqueue(pool)
    gate = Gated()
    dispatch = dispatcher(pool, gate)
    await dispatch.run_once()
    await gate.started.acquire()
    worker = dispatch.worker
    assert await worker.heartbeat_once() == []
    await sweeper(pool).run_once(datetime.now(UTC) + LATER)
    [lost] = await worker.heartbeat_once()
    assert lost.id == job
    await settled(worker)
    [call] = await ledger_rows(pool, job)
    assert (call["outcome"], call["orphaned"], call["error"]) == (
        "failed",
        True,
        "cancelled mid-call",
    )


async def test_a_crashed_generation_fails_its_job_with_a_clear_error(pool: asyncpg.Pool) -> None:
    job = await enqueue(pool)
    dispatch = dispatcher(pool, Crashing())
    await dispatch.run_once()
    await settled(dispatch.worker)
    row = await status_of(pool, job)
    assert (row["status"], row["error"]) == (
        "failed",
        "generation crashed: RuntimeError: the model answered nonsense",
    )


async def test_a_restarted_worker_fails_only_its_own_dead_processes_jobs(
    pool: asyncpg.Pool,
) -> None:
    dead, alive = PID_MAX + 1, os.getppid()  # never a live process; a live one
    host = "box"
    silent, beating = datetime.now(UTC) - LATER, datetime.now(UTC)
    holders = {
        f"w_1:{host}:{dead}": silent,  # the only one to fail
        f"w_1:{host}:{dead + 1}": beating,  # a heartbeat still fresh: not dead after all
        f"w_1:{host}:{alive}": silent,
        f"wx1:{host}:{dead}": silent,  # names a pattern would match
        f"w%1:{host}:{dead}": silent,
        f"w_1:other-host:{dead}": silent,  # a pid judged on another machine
        f"w_1:{dead}": silent,  # not an identity at all
    }
    jobs = {}
    for index, (worker_id, heartbeat) in enumerate(holders.items()):
        jobs[worker_id] = await enqueue(pool, f"user-{index}")
        await pool.execute(
            """UPDATE generation_jobs SET status = 'generating', attempt = 1, started_at = now(),
                   heartbeat_at = $3, worker_id = $2 WHERE id = $1""",
            jobs[worker_id],
            worker_id,
            heartbeat,
        )
    worker = Worker(
        pool, Recording(), name="w_1", host=host, capacity=1, presumed_dead_after=MINUTE
    )
    first = f"w_1:{host}:{dead}"
    assert await worker.reconcile() == [jobs[first]]
    statuses = {
        worker_id: (await status_of(pool, job))["status"] for worker_id, job in jobs.items()
    }
    assert statuses == {
        worker_id: "failed" if worker_id == first else "generating" for worker_id in holders
    }
    assert "died mid-generation" in (await status_of(pool, jobs[first]))["error"]
