"""The job state machine: every legal transition happens once; every illegal one is a no-op
with a zero row count."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from core.sql import Connection, Queries
from generation import review_settlement
from generation.finisher import Ending, Failed, Finished, Finisher
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.worker import Worker
from tests.support.dispatching import DEAD, PID_MAX, restarted
from tests.support.generators import Holding, Lingering
from tests.support.jobs import claim, enqueue, finish, job_in, status_of
from tests.support.polling import eventually

queries = Queries("generation")
HOUR = timedelta(hours=1)
STATUSES = ("pending", "generating", "awaiting_review", "completed", "failed", "cancelled")
MISSION = 41
# A process of this machine ("box") that is no longer alive.


async def row_of(pool: asyncpg.Pool, job_id: int) -> dict[str, object]:
    row = await pool.fetchrow("SELECT * FROM generation_jobs WHERE id = $1", job_id)
    assert row is not None
    return dict(row)


def changes(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
    """The columns a transition wrote, with their new values."""
    return {column: value for column, value in after.items() if before[column] != value}


async def claimed(pool: asyncpg.Pool, job_id: int, attempt: int) -> ClaimedJob:
    """The job as a worker holds it under `attempt`, whatever the database now says."""
    row = await pool.fetchrow(
        "SELECT lane, user_id, track, domain, created_at FROM generation_jobs WHERE id = $1",
        job_id,
    )
    assert row is not None
    return ClaimedJob(
        id=job_id,
        attempt=attempt,
        lane=row["lane"],
        user_id=row["user_id"],
        track=row["track"],
        domain=row["domain"],
        created_at=row["created_at"],
    )


async def worker_holding(pool: asyncpg.Pool, *held: tuple[int, int]) -> Worker:
    """A worker running generations of these (job, attempt)s."""
    worker = Worker(pool, Holding(), name="box", capacity=len(held))
    for job_id, attempt in held:
        worker.start(await claimed(pool, job_id, attempt))
    await asyncio.sleep(0)
    assert len(worker.running()) == len(held)
    return worker


async def released(pool: asyncpg.Pool, user_id: str = "user-1") -> int:
    """A job claimed under attempt 1, then released by its stopping worker: pending under 2."""
    job = await job_in(pool, "generating", user_id)
    assert await (await worker_holding(pool, (job, 1))).release() == [job]
    return job


async def test_claim_moves_pending_to_generating_and_bumps_the_attempt(pool: asyncpg.Pool) -> None:
    job = await enqueue(pool)
    assert await claim(pool) == [job]
    row = await status_of(pool, job)
    assert (row["status"], row["attempt"], row["worker_id"]) == ("generating", 1, "w:1")
    assert await claim(pool) == [], "a generating job is not claimed again"


@pytest.mark.parametrize("final", ["completed", "awaiting_review", "failed"])
async def test_a_generating_job_finishes_once_under_its_attempt(
    pool: asyncpg.Pool, final: str
) -> None:
    job = await enqueue(pool)
    await claim(pool)
    assert not await finish(pool, job, 2, final), "a wrong attempt changes nothing"
    assert await finish(pool, job, 1, final)
    assert (await status_of(pool, job))["status"] == final
    for again in ("completed", "awaiting_review", "failed"):
        assert not await finish(pool, job, 1, again), f"{final} -> {again} must be a no-op"
    assert (await status_of(pool, job))["status"] == final


async def test_only_a_pending_job_is_cancelled(pool: asyncpg.Pool) -> None:
    generating, pending = await enqueue(pool), await enqueue(pool)
    assert await claim(pool, want=1) == [generating]
    assert await pool.fetchval(queries["job_cancel_if_pending"], pending) == pending
    assert await pool.fetchval(queries["job_cancel_if_pending"], pending) is None
    assert await pool.fetchval(queries["job_cancel_if_pending"], generating) is None
    assert (await status_of(pool, generating))["status"] == "generating"
    assert await claim(pool) == [], "a cancelled job is never claimed"


async def test_finished_jobs_are_not_swept_and_terminal_jobs_stay_terminal(
    pool: asyncpg.Pool,
) -> None:
    later = datetime.now(UTC) + 2 * HOUR
    done = await enqueue(pool)
    await claim(pool)
    assert await finish(pool, done, 1, "completed")
    assert await pool.fetch(queries["jobs_fail_if_stale"], HOUR, HOUR, later) == []
    assert await pool.fetch(queries["jobs_fail_if_pending_expired"], HOUR, later) == []
    assert await pool.fetchval(queries["job_cancel_if_pending"], done) is None
    assert (await status_of(pool, done))["status"] == "completed"


async def test_the_sweeper_fails_stale_and_expired_jobs_with_a_reason(pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC)
    generating = await enqueue(pool, "a", now=now)
    await claim(pool, now=now)
    waiting = await enqueue(pool, "b", now=now)
    minute = timedelta(minutes=1)

    assert (
        await pool.fetch(queries["jobs_fail_if_stale"], minute, HOUR, now + 30 * minute / 60) == []
    )
    swept = await pool.fetch(queries["jobs_fail_if_stale"], minute, HOUR, now + 2 * minute)
    assert [row["id"] for row in swept] == [generating]
    assert "stopped heartbeating" in swept[0]["error"]

    assert await pool.fetch(queries["jobs_fail_if_pending_expired"], HOUR, now + 59 * minute) == []
    expired = await pool.fetch(queries["jobs_fail_if_pending_expired"], HOUR, now + 61 * minute)
    assert [row["id"] for row in expired] == [waiting]
    row = await status_of(pool, waiting)
    assert row["status"] == "failed"
    assert "waited in the queue longer than 01:00:00" in row["error"]


async def test_a_job_generating_past_the_hard_limit_is_failed_even_with_fresh_heartbeats(
    pool: asyncpg.Pool,
) -> None:
    start = datetime.now(UTC)
    job = await enqueue(pool, now=start)
    await claim(pool, now=start)
    ten_minutes = timedelta(minutes=10)
    late = start + ten_minutes + timedelta(seconds=1)
    assert await pool.fetch(queries["jobs_heartbeat_if_generating"], [job], [1], late)
    swept = await pool.fetch(queries["jobs_fail_if_stale"], timedelta(minutes=1), ten_minutes, late)
    assert [row["id"] for row in swept] == [job]
    assert "ran longer than 00:10:00" in swept[0]["error"]


async def test_heartbeats_answer_only_for_jobs_still_held_under_their_attempt(
    pool: asyncpg.Pool,
) -> None:
    held, other = await enqueue(pool, "a"), await enqueue(pool, "b")
    await claim(pool)
    alive = await pool.fetch(queries["jobs_heartbeat_if_generating"], [held, other], [1, 7], None)
    assert [row["id"] for row in alive] == [held]


NOT_GENERATING = [status for status in STATUSES if status != "generating"]


async def test_a_stopping_worker_releases_its_job_to_the_queue_under_a_new_attempt(
    pool: asyncpg.Pool,
) -> None:
    held, elsewhere = [await job_in(pool, "generating", f"user-{n}") for n in range(2)]
    before = {job: await row_of(pool, job) for job in (held, elsewhere)}
    assert await (await worker_holding(pool, (held, 1))).release() == [held]
    assert changes(before[held], await row_of(pool, held)) == {
        "status": "pending",
        "attempt": 2,
        "worker_id": None,
        "started_at": None,
        "heartbeat_at": None,
    }, "back in the queue, in its place in line (fair_time), under a new attempt"
    assert await row_of(pool, elsewhere) == before[elsewhere], "not held by this worker"
    assert await claim(pool) == [held]
    assert (await status_of(pool, held))["attempt"] == 3


class EndingInTurn:
    """The first generation ends at once and writes its end in a store that waits for `go`;
    the second ends at once and its end waits its turn behind that store; the third runs on
    until it is stopped."""

    def __init__(self) -> None:
        self.storing = asyncio.Event()
        self.second_ended = asyncio.Event()
        self.go = asyncio.Event()

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Ending:
        if self.second_ended.is_set():
            await asyncio.Event().wait()
        if self.storing.is_set():
            self.second_ended.set()
            return Finished(status="completed")

        async def store(connection: Connection) -> Finished:
            self.storing.set()
            await self.go.wait()
            return Finished(status="completed")

        return store


async def test_a_stopping_worker_releases_what_runs_and_lets_what_has_ended_write_its_end(
    pool: asyncpg.Pool,
) -> None:
    storing, waiting, running = [await job_in(pool, "generating", f"user-{n}") for n in range(3)]
    generator = EndingInTurn()
    worker = Worker(pool, generator, name="box", capacity=3)
    worker.start(await claimed(pool, storing, 1))
    await generator.storing.wait()
    worker.start(await claimed(pool, waiting, 1))
    await generator.second_ended.wait()
    worker.start(await claimed(pool, running, 1))

    releasing = asyncio.create_task(worker.release())

    async def running_released() -> bool:
        return bool((await status_of(pool, running))["status"] == "pending")

    try:
        await eventually(running_released, 5, "the running generation released at once")
        assert not releasing.done(), "it waits for the ends being written"
    finally:
        generator.go.set()
    assert await releasing == [running]
    for job in (storing, waiting):
        row = await status_of(pool, job)
        assert (row["status"], row["attempt"]) == ("completed", 1), "paid for: not released"
    assert (await status_of(pool, running))["attempt"] == 2


async def test_a_release_cuts_short_a_stopped_generation_that_takes_too_long_to_end(
    pool: asyncpg.Pool,
) -> None:
    """A generation given back at a release may finish what it had under way (storing the id
    of its call), within the worker's finishing time; one that takes longer is cut short."""
    job = await job_in(pool, "generating")
    worker = Worker(pool, Lingering(), name="box", capacity=1, finishing_seconds=0.2)
    worker.start(await claimed(pool, job, 1))
    await asyncio.sleep(0)

    started = time.monotonic()
    assert await worker.release() == [job]
    assert time.monotonic() - started < 5, "cut short, not waited for"
    assert worker.running() == []


@pytest.mark.parametrize(
    ("start", "offset"),
    [
        # Held under its own attempt: only the status condition keeps it from being released.
        *(pytest.param(status, 0, id=status) for status in NOT_GENERATING),
        pytest.param("generating", -1, id="generating-under-an-earlier-attempt"),
        pytest.param("generating", 1, id="generating-under-a-later-attempt"),
    ],
)
async def test_a_stopping_worker_releases_nothing_it_no_longer_holds(
    pool: asyncpg.Pool, start: str, offset: int
) -> None:
    job = await job_in(pool, start, mission_id=MISSION)
    before = await row_of(pool, job)
    worker = await worker_holding(pool, (job, (await status_of(pool, job))["attempt"] + offset))
    assert await worker.release() == []
    assert await row_of(pool, job) == before


@pytest.mark.parametrize(
    ("start", "offset"),
    [
        pytest.param("pending", 0, id="pending-never-claimed"),
        pytest.param("released", -1, id="pending-released-ended-by-its-stopped-attempt"),
        pytest.param("released", 0, id="pending-released-under-its-new-attempt"),
        pytest.param("cancelled", 0, id="cancelled"),
    ],
)
@pytest.mark.parametrize(
    "ending",
    [
        Finished(status="completed"),
        Finished(status="awaiting_review", mission_id=MISSION),
        Failed("the model answered nonsense"),
    ],
    ids=["completed", "awaiting_review", "failed"],
)
async def test_a_job_not_generating_is_not_finished(
    pool: asyncpg.Pool, start: str, offset: int, ending: Finished | Failed
) -> None:
    job = await released(pool) if start == "released" else await job_in(pool, start)
    before = await row_of(pool, job)
    attempt = (await status_of(pool, job))["attempt"] + offset
    assert not await Finisher(pool).finish(await claimed(pool, job, attempt), ending)
    assert await row_of(pool, job) == before


async def test_two_batches_storing_the_same_results_in_opposite_orders_both_end(
    pool: asyncpg.Pool,
) -> None:
    """Two workers' final transactions store "one" then "two" and "two" then "one": the
    deadlock rolls one batch back whole and it is written again, so no job fails for it."""
    await pool.execute("CREATE TABLE stored_results (result text PRIMARY KEY)")
    jobs = [await claimed(pool, await job_in(pool, "generating", f"user-{n}"), 1) for n in range(4)]
    first_stored, second_stored, blocked = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def the_other_batch_blocked() -> None:
        if not blocked.is_set():  # once: a batch written again does not wait again
            await eventually(waiting_for_a_lock, 10, "the other batch to wait for this one")
            blocked.set()

    async def waiting_for_a_lock() -> bool:
        return bool(
            await pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
        )

    def storing(
        result: str, after: Callable[[], Awaitable[object]], then: asyncio.Event | None = None
    ) -> Ending:
        async def store(connection: Connection) -> Finished | Failed:
            await after()
            stored = await connection.fetchval(
                "INSERT INTO stored_results VALUES ($1) ON CONFLICT DO NOTHING RETURNING result",
                result,
            )
            if then is not None:
                then.set()
            return Finished(status="completed") if stored else Failed("stored already")

        return store

    async def at_once() -> None:
        pass

    one, other = Finisher(pool), Finisher(pool)
    ended = await asyncio.gather(
        one.finish(jobs[0], storing("one", at_once, then=first_stored)),
        one.finish(jobs[1], storing("two", second_stored.wait)),
        other.finish(jobs[2], storing("two", first_stored.wait, then=second_stored)),
        other.finish(jobs[3], storing("one", the_other_batch_blocked)),
    )
    assert list(ended) == [True] * 4
    errors = [(await status_of(pool, job.id))["error"] for job in jobs]
    assert sorted(errors, key=str) == [None, None, "stored already", "stored already"], errors
    assert await pool.fetchval("SELECT count(*) FROM stored_results") == 2


async def test_approving_its_mission_completes_the_job_awaiting_review(
    pool: asyncpg.Pool,
) -> None:
    named, other = [
        await job_in(pool, "awaiting_review", f"user-{n}", mission_id=MISSION) for n in range(2)
    ]
    before = {job: await row_of(pool, job) for job in (named, other)}
    async with pool.acquire() as connection:
        assert await review_settlement.complete_awaiting_review(connection, named, 7)
    changed = changes(before[named], await row_of(pool, named))
    assert changed.pop("finished_at") is not None
    assert changed == {"status": "completed", "instance_id": 7}
    assert await row_of(pool, other) == before[other], "only the job named is completed"


@pytest.mark.parametrize("start", [status for status in STATUSES if status != "awaiting_review"])
async def test_only_a_job_awaiting_review_is_completed_by_its_review(
    pool: asyncpg.Pool, start: str
) -> None:
    job = await job_in(pool, start, mission_id=MISSION)
    before = await row_of(pool, job)
    async with pool.acquire() as connection:
        assert not await review_settlement.complete_awaiting_review(connection, job, 7)
    assert await row_of(pool, job) == before


async def test_rejecting_its_mission_fails_every_job_awaiting_its_review(
    pool: asyncpg.Pool,
) -> None:
    waiting = [
        await job_in(pool, "awaiting_review", f"user-{n}", mission_id=MISSION) for n in range(2)
    ]
    other = await job_in(pool, "awaiting_review", "user-2", mission_id=MISSION + 1)
    before = {job: await row_of(pool, job) for job in [*waiting, other]}
    async with pool.acquire() as connection:
        assert (
            await review_settlement.fail_awaiting_review(
                connection, MISSION, "the bug is not a bug"
            )
            == 2
        )
    for job in waiting:
        changed = changes(before[job], await row_of(pool, job))
        assert changed.pop("finished_at") is not None
        assert changed == {"status": "failed", "error": "the bug is not a bug"}
    assert await row_of(pool, other) == before[other], "waiting on another mission"


@pytest.mark.parametrize("start", [status for status in STATUSES if status != "awaiting_review"])
async def test_rejecting_a_mission_fails_only_the_jobs_awaiting_its_review(
    pool: asyncpg.Pool, start: str
) -> None:
    job = await job_in(pool, start, mission_id=MISSION)
    # No transition names a mission on a pending, generating or cancelled job: named here, so
    # only the status condition keeps the job out.
    await pool.execute(
        "UPDATE generation_jobs SET mission_id = $2 WHERE id = $1 AND mission_id IS NULL",
        job,
        MISSION,
    )
    before = await row_of(pool, job)
    async with pool.acquire() as connection:
        assert await review_settlement.fail_awaiting_review(connection, MISSION, "rejected") == 0
    assert await row_of(pool, job) == before


async def test_a_restarted_worker_fails_the_jobs_its_dead_process_was_generating(
    pool: asyncpg.Pool,
) -> None:
    held = [await job_in(pool, "generating", f"user-{n}", worker=DEAD) for n in range(2)]
    elsewhere = await job_in(pool, "generating", "user-2", worker=f"box:other-host:{PID_MAX + 1}")
    before = {job: await row_of(pool, job) for job in [*held, elsewhere]}
    assert sorted(await restarted(pool).reconcile()) == held
    for job in held:
        changed = changes(before[job], await row_of(pool, job))
        assert changed.pop("finished_at") is not None
        assert changed == {
            "status": "failed",
            "error": f"worker {DEAD} died mid-generation and was restarted",
        }, "the attempt and the worker stay on record"
    assert await row_of(pool, elsewhere) == before[elsewhere], "another machine's process"


@pytest.mark.parametrize("start", NOT_GENERATING)
async def test_a_restarted_worker_fails_only_what_its_dead_process_was_generating(
    pool: asyncpg.Pool, start: str
) -> None:
    # The dead process also left a generating job, so the restart does fail some.
    generating = await job_in(pool, "generating", "user-0", worker=DEAD)
    job = await job_in(pool, start, worker=DEAD, mission_id=MISSION)
    # Pending and cancelled jobs name no worker: named here, so only the status condition
    # keeps the job out.
    await pool.execute(
        "UPDATE generation_jobs SET worker_id = $2 WHERE id = $1 AND worker_id IS NULL", job, DEAD
    )
    before = await row_of(pool, job)
    assert await restarted(pool).reconcile() == [generating]
    assert await row_of(pool, job) == before
    assert (
        await pool.fetch(queries["jobs_fail_if_owned_by_dead_process"], [DEAD], timedelta(0), None)
        == []
    )
