"""Dispatch in one process: order, fairness, the global cap, lanes, and counting failures."""

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from generation import jobs
from generation.dispatcher import Dispatcher
from generation.jobs import ClaimedJob
from generation.sweeper import Sweeper
from generation.worker import Worker
from tests.support.dispatching import MINUTE, dispatcher
from tests.support.generators import Gated
from tests.support.jobs import enqueue


async def test_interactive_before_replenish_and_round_robin_across_users(
    pool: asyncpg.Pool,
) -> None:
    start = datetime.now(UTC)
    order = []
    # alice queues three jobs first, then bob and carol one each, then a replenish job.
    for offset, user in enumerate(["alice", "alice", "alice", None, "bob", "carol"]):
        order.append((user, await enqueue(pool, user, now=start + timedelta(seconds=offset))))
    gate = Gated()
    claimed: list[str | None] = []
    for _ in range(6):
        claimed += [
            job.user_id for job in await dispatcher(pool, gate, cap=1 + len(claimed)).run_once()
        ]
    # bob's and carol's first jobs overtake alice's second and third, which are a turn later.
    assert claimed == ["alice", "bob", "carol", "alice", "alice", None]
    gate.release()


async def test_queue_position_follows_the_dispatch_order(pool: asyncpg.Pool) -> None:
    start = datetime.now(UTC)
    alice = [await enqueue(pool, "alice", now=start + timedelta(seconds=i)) for i in range(2)]
    refill = await enqueue(pool, None, now=start + timedelta(seconds=2))
    bob = await enqueue(pool, "bob", now=start + timedelta(seconds=3))
    positions = {job: (await jobs.get(pool, job)).queue_position for job in [*alice, refill, bob]}
    assert positions == {alice[0]: 0, bob: 1, alice[1]: 2, refill: 3}


async def test_the_global_cap_holds_when_many_dispatchers_claim_at_the_same_moment(
    pool: asyncpg.Pool,
) -> None:
    for index in range(40):
        await enqueue(pool, f"user-{index}")
    gate = Gated()
    dispatchers = [dispatcher(pool, gate, cap=7, name=f"w{index}") for index in range(8)]
    results = await asyncio.gather(*(each.run_once() for each in dispatchers))
    assert sum(len(claimed) for claimed in results) == 7
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE status = 'generating'") == 7
    )
    results = await asyncio.gather(*(each.run_once() for each in dispatchers))
    assert sum(len(claimed) for claimed in results) == 0, "full: nobody claims"
    gate.release()


async def test_a_worker_claims_only_the_jobs_of_the_domains_it_can_make(
    pool: asyncpg.Pool,
) -> None:
    start = datetime.now(UTC)
    # Jobs of a domain nobody here can make are first in line on both lanes.
    made_by = {"javascript-frontend": None, "sql-data": "with-pgtap", "python-backend": "any"}
    wanted: dict[int, str] = {}
    for index in range(24):
        domain = list(made_by)[index % 3]
        user = f"user-{index}" if index % 2 else None
        wanted[await enqueue(pool, user, domain=domain, now=start + timedelta(seconds=index))] = (
            domain
        )
    gate = Gated()
    # Room for every job: only what a worker can make holds it back.
    room = {"cap": 40, "replenish_cap": 40}
    without_pgtap = dispatcher(pool, gate, **room, domains=["python-backend"], name="no-pgtap")
    with_pgtap = dispatcher(
        pool, gate, **room, domains=["python-backend", "sql-data"], name="with-pgtap"
    )
    # Both claim at the same moment, from connections of their own, twice.
    claims = [
        await asyncio.gather(without_pgtap.run_once(), with_pgtap.run_once()) for _ in range(2)
    ]
    by_worker = {
        "no-pgtap": [job for round_ in claims for job in round_[0]],
        "with-pgtap": [job for round_ in claims for job in round_[1]],
    }
    assert {job.domain for job in by_worker["no-pgtap"]} <= {"python-backend"}
    assert {job.domain for job in by_worker["with-pgtap"]} <= {"python-backend", "sql-data"}
    assert "sql-data" in {job.domain for job in by_worker["with-pgtap"]}
    claimed = [job.id for jobs_of_one in by_worker.values() for job in jobs_of_one]
    assert len(claimed) == len(set(claimed)), "no job claimed twice"
    assert sorted(claimed) == sorted(job for job, domain in wanted.items() if made_by[domain])
    pending = await pool.fetch("SELECT domain FROM generation_jobs WHERE status = 'pending'")
    assert {row["domain"] for row in pending} == {"javascript-frontend"}, "left for a worker"
    gate.release()


async def test_the_replenish_lane_takes_at_most_its_share_of_the_cap(pool: asyncpg.Pool) -> None:
    for _ in range(6):
        await enqueue(pool, None)
    gate = Gated()
    dispatch = dispatcher(pool, gate, cap=6, replenish_cap=2)
    assert len(await dispatch.run_once()) == 2
    assert await dispatch.run_once() == []
    interactive = await enqueue(pool, "waiting-user")
    assert [job.id for job in await dispatch.run_once()] == [interactive]
    gate.release()


async def test_the_in_process_seatbelt_limits_claims_to_free_slots(pool: asyncpg.Pool) -> None:
    for index in range(5):
        await enqueue(pool, f"user-{index}")
    gate = Gated()
    dispatch = dispatcher(pool, gate, cap=10, capacity=2)
    assert len(await dispatch.run_once()) == 2
    assert await dispatch.run_once() == []
    gate.release()


async def test_a_counting_failure_makes_the_dispatcher_claim_nothing(pool: asyncpg.Pool) -> None:
    await enqueue(pool)
    gate = Gated()
    worker = Worker(pool, gate, name="blind", capacity=5)
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    dispatch = Dispatcher(
        pool,
        worker,
        sweeper,
        global_cap=5,
        replenish_cap=5,
        count_timeout_seconds=0.2,
        maintenance_timeout_seconds=0.2,
    )
    async with pool.acquire() as blocker, blocker.transaction():
        # An exclusive lock makes the count time out: the dispatcher cannot know what is in flight.
        await blocker.execute("LOCK TABLE generation_jobs IN ACCESS EXCLUSIVE MODE")
        assert await asyncio.wait_for(dispatch.run_once(), timeout=10) == []
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE status = 'generating'") == 0
    )
    assert len(await dispatch.run_once()) == 1, "once counting works again, it claims"
    gate.release()


async def test_ticks_and_wake_ups_never_overlap_within_a_process(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(3):
        await enqueue(pool, f"user-{index}")
    gate = Gated()
    dispatch = dispatcher(pool, gate, cap=3)
    running, highest, runs = 0, 0, 0
    claim = dispatch.claim
    # The first run's claim is held until every other request has arrived during it.
    arrived = asyncio.Event()

    async def counted_claim(now: datetime | None = None) -> list[ClaimedJob]:
        nonlocal running, highest, runs
        running += 1
        runs += 1
        highest = max(highest, running)
        try:
            await arrived.wait()
            return await claim(now)
        finally:
            running -= 1

    monkeypatch.setattr(dispatch, "claim", counted_claim)
    for _ in range(5):
        dispatch.wake()
    await asyncio.gather(*(dispatch.tick() for _ in range(5)))
    arrived.set()
    await dispatch.settled()
    assert highest == 1, "one run at a time"
    assert 2 <= runs <= 3, "requests during a run make one more run, not one each"
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE status = 'generating'") == 3
    )
    gate.release()
