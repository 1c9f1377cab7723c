"""The grading queue, driven directly through generation/grader.py on the real database, with a
gated stand-in for the sandbox (the sandbox's own runs are tests/integration/proof's): attempt
fencing, heartbeats, the attempts limit, pending expiry, giving back at a stop, the seatbelt, a
claim whose answer was lost, a verdict written through a blip, and NOTIFY waking a grader
whose tick is far off."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec
import pytest

from generation.grader import MAX_ATTEMPTS, ClaimedGrading, Grader
from generation.gradings import queries
from server.grading_runtime import GradingRuntime
from server.settings import Settings
from tests.support.faults import Faults
from tests.support.grading import GatedProver, pending_submission, stock
from tests.support.polling import eventually, eventually_here

HEARTBEAT_TIMEOUT = timedelta(seconds=30)
LATER = timedelta(minutes=5)  # past the heartbeat timeout: the sweeper takes gradings back
_names = itertools.count(1)


def grader(
    pool: asyncpg.Pool, prover: GatedProver, *, capacity: int = 2, global_cap: int = 10
) -> Grader:
    return Grader(
        pool,
        prover,
        worker_id=f"grader-{next(_names)}:test:0",
        capacity=capacity,
        global_cap=global_cap,
        languages=["python"],
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        pending_expiry=timedelta(hours=1),
        time_limit_s=30,
    )


async def row(pool: asyncpg.Pool, submission_id: int) -> asyncpg.Record:
    found = await pool.fetchrow(
        "SELECT status, attempt, worker_id, error FROM submissions WHERE id = $1", submission_id
    )
    assert found is not None
    return found


def later() -> datetime:
    return datetime.now(UTC) + LATER


@pytest.fixture
async def mission(pool: asyncpg.Pool) -> int:
    return await stock(pool)


@pytest.fixture
async def stopped_at_the_end() -> AsyncIterator[list[Grader]]:
    """Graders a test made, stopped at its end so no task outlives it."""
    graders: list[Grader] = []
    yield graders
    for made in graders:
        await made.stop(0)


async def test_a_late_verdict_of_a_taken_back_attempt_writes_nothing(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    submission = await pending_submission(pool, mission)
    first, second = GatedProver("the first"), GatedProver("the second")
    stalled = grader(pool, first)
    stopped_at_the_end.append(stalled)
    [claimed] = await stalled.claim()
    assert claimed.attempt == 1
    await first.started.wait()

    # Its heartbeats stop; the sweeper takes it back and another grader claims it again.
    assert await stalled.sweep(later()) == [submission]
    taking_over = grader(pool, second)
    stopped_at_the_end.append(taking_over)
    [again] = await taking_over.claim()
    assert (again.id, again.attempt) == (submission, 2)

    first.gate.set()
    await eventually_here(lambda: not stalled.running(), 5, "the stalled grading to end")
    late = await row(pool, submission)
    assert (late["status"], late["attempt"], late["worker_id"]) == (
        "running",
        2,
        taking_over.worker_id,
    ), "the first attempt's verdict wrote nothing"

    second.gate.set()
    await eventually_here(lambda: not taking_over.running(), 5, "the second grading to end")
    ended = await row(pool, submission)
    assert (ended["status"], ended["attempt"], ended["error"]) == ("error", 2, "the second opened")


async def test_a_grading_taken_back_meanwhile_is_stopped_at_the_heartbeat(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    submission = await pending_submission(pool, mission)
    prover = GatedProver()
    held = grader(pool, prover)
    stopped_at_the_end.append(held)
    await held.claim()
    await prover.started.wait()
    assert await held.heartbeat_once() == []  # still its own

    await held.sweep(later())
    assert await held.heartbeat_once() == [submission]
    await eventually_here(lambda: not held.running(), 5, "the lost grading to stop")
    assert prover.cancelled == 1
    assert (await row(pool, submission))["status"] == "pending"


async def test_a_grading_taken_back_and_claimed_again_here_holds_both_attempts_apart(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    """The old attempt's task, still ending, leaves the new attempt's place alone."""
    submission = await pending_submission(pool, mission)
    prover = GatedProver()
    both = grader(pool, prover)
    stopped_at_the_end.append(both)
    await both.claim()
    await both.sweep(later())
    assert len(await both.claim()) == 1
    assert sorted((held.id, held.attempt) for held in both.running()) == [
        (submission, 1),
        (submission, 2),
    ]

    prover.gate.set()
    await eventually_here(lambda: not both.running(), 5, "both attempts to end")
    ended = await row(pool, submission)
    assert (ended["status"], ended["attempt"]) == ("error", 2)


async def test_a_grading_taken_back_at_every_attempt_ends_as_an_error(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    """A submission that kills its worker each time would otherwise go round for ever."""
    submission = await pending_submission(pool, mission)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        dying = grader(pool, GatedProver())
        stopped_at_the_end.append(dying)
        [claimed] = await dying.claim()
        assert claimed.attempt == attempt
        await dying.sweep(later())
    ended = await row(pool, submission)
    assert (ended["status"], ended["attempt"]) == ("error", MAX_ATTEMPTS)
    assert ended["error"] == f"grading was interrupted {MAX_ATTEMPTS} times (its worker stopped)"


async def test_a_submission_waiting_past_the_pending_expiry_ends_as_an_error(
    pool: asyncpg.Pool, mission: int
) -> None:
    submission = await pending_submission(pool, mission)
    idle = grader(pool, GatedProver())
    assert await idle.sweep() == []
    assert await idle.sweep(datetime.now(UTC) + timedelta(hours=2)) == [submission]
    expired = await row(pool, submission)
    assert expired["status"] == "error"
    assert expired["error"].startswith("waited in the queue longer than 01:00:00")


async def test_a_stopping_grader_gives_its_gradings_back_to_the_queue(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    submissions = {await pending_submission(pool, mission) for _ in range(2)}
    prover = GatedProver()
    stopping = grader(pool, prover)
    assert {claimed.id for claimed in await stopping.claim()} == submissions

    await stopping.stop(grace_seconds=0.1)
    assert stopping.running() == []
    assert prover.cancelled == 2
    for submission in submissions:
        back = await row(pool, submission)
        assert (back["status"], back["attempt"], back["worker_id"]) == ("pending", 1, None)
    assert await stopping.claim() == [], "a stopped grader claims nothing"
    successor = grader(pool, GatedProver())
    stopped_at_the_end.append(successor)
    assert {claimed.attempt for claimed in await successor.claim()} == {2}


async def test_the_seatbelt_holds_gradings_past_the_capacity_should_the_count_be_wrong(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    for _ in range(3):
        await pending_submission(pool, mission)
    prover = GatedProver()
    belted = grader(pool, prover, capacity=1)
    stopped_at_the_end.append(belted)
    assert len(await belted.claim()) == 1
    belted.capacity = 3  # a count gone wrong: the claim takes two more
    assert len(await belted.claim()) == 2
    await prover.started.wait()
    assert (prover.running, prover.highest) == (1, 1), "one grading in the sandbox at a time"

    prover.gate.set()
    await eventually_here(lambda: not belted.running(), 5, "the three gradings to end")
    assert prover.highest == 1


async def test_a_claim_whose_answer_was_lost_is_given_back_at_the_next_tick(
    pool: asyncpg.Pool, mission: int, stopped_at_the_end: list[Grader]
) -> None:
    submission = await pending_submission(pool, mission)
    losing = grader(pool, GatedProver())
    stopped_at_the_end.append(losing)
    # What a claim whose answer never arrived (a timeout, a dropped connection) leaves: its
    # gradings running under the grader's identity, the grader holding none of them.
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute(queries["grading_dispatch_lock"])
        await connection.fetch(
            queries["submissions_claim_within_cap"], 1, 10, losing.worker_id, ["python"], None
        )
    assert losing.running() == []

    [claimed] = await losing.run_once()  # long before the heartbeat timeout
    assert (claimed.id, claimed.attempt) == (submission, 2)
    assert [held.id for held in losing.running()] == [submission]


async def test_a_verdict_that_meets_a_database_blip_is_written_once_it_answers(
    database_url: str, pool: asyncpg.Pool, mission: int
) -> None:
    submission = await pending_submission(pool, mission)
    faults = Faults()
    faulty = await faults.pool(database_url)
    try:
        faults.fail("finished_at = now()", ConnectionResetError("connection reset by peer"))
        prover = GatedProver()
        writing = grader(faulty, prover)
        await writing.claim()
        prover.gate.set()
        await eventually_here(lambda: not writing.running(), 10, "the verdict to be written")
    finally:
        await faulty.close()
    assert faults.injected == 1
    written = await row(pool, submission)
    assert (written["status"], written["error"]) == ("error", "gate opened")


class Ticking(Grader):
    """Counts its ticks, so that a test knows what claimed without one."""

    ticks = 0

    async def run_once(self, now: datetime | None = None) -> list[ClaimedGrading]:
        self.ticks += 1
        return await super().run_once(now)


async def test_a_notify_wakes_the_grader_long_before_its_tick(
    database_url: str, pool: asyncpg.Pool, mission: int, settings: Settings
) -> None:
    """A tick of an hour: only the NOTIFY of a submission, and a slot freed, start gradings."""
    prover = GatedProver()
    runtime: GradingRuntime | None = None
    woken = Ticking(
        pool,
        prover,
        worker_id="woken:test:0",
        capacity=1,
        global_cap=10,
        languages=["python"],
        heartbeat_timeout=HEARTBEAT_TIMEOUT,
        pending_expiry=timedelta(hours=1),
        time_limit_s=30,
        on_slot_freed=lambda: runtime.wake() if runtime is not None else None,  # as a worker's
    )
    runtime = GradingRuntime(
        woken, database_url, msgspec.structs.replace(settings, tick_seconds=3600.0)
    )
    await runtime.start()
    try:
        await eventually_here(lambda: woken.ticks == 1, 5, "the runtime's first tick, at its start")
        for _ in range(2):
            await pending_submission(pool, mission)
        await pool.execute(queries["graders_wake"])
        await eventually_here(woken.running, 5, "a grading claimed at the NOTIFY")
        prover.gate.set()  # the first ends; its freed slot claims the second

        async def both_graded() -> bool:
            return bool(
                await pool.fetchval("SELECT count(*) = 2 FROM submissions WHERE status = 'error'")
            )

        await eventually(both_graded, 5, "both gradings, without a tick")
        assert woken.ticks == 1
    finally:
        await runtime.stop()
