"""Replenishment on the real database: a drained pool refilled to target, one pass at a time
across connections and processes, keys that dedupe a pass over the same state, the growth
cap, shedding, and interactive work finding room under a saturated queue."""

import asyncio
import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest
import yaml

from core import domains
from core.domains import DomainMap
from core.sql import Connection
from generation import admission
from generation.dispatcher import Dispatcher
from generation.finisher import Ending, Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.sweeper import Sweeper
from generation.worker import Generator, Worker
from pool import serving, stats
from pool.forecast import PRIOR_APPROVED, PRIOR_GENERATED
from pool.replenish import Replenisher, ReplenishPass
from server import services
from server.runtime import WorkerRuntime
from server.services import queue_limits
from server.settings import Settings
from tests.support.fleet import EVERY_DOMAIN, standing_worker
from tests.support.generators import Gated
from tests.support.jobs import LIMITS, enqueue
from tests.support.missions import add_mission
from tests.support.polling import eventually
from tests.support.replenish_process import BARRIER_LOCK
from tests.support.server import ROOT, environment

PRIOR_PASS = PRIOR_APPROVED * PRIOR_GENERATED
HEARTBEAT_TIMEOUT = Settings().heartbeat_timeout
# Every domain can be made unless a test says otherwise.
pytestmark = pytest.mark.usefixtures("standing_worker")
MINUTE = timedelta(minutes=1)


def domain_map(**targets: int) -> dict[str, Any]:
    """A map whose engineers may be served python-backend and sql-data, and whose
    javascript-frontend no track reaches; jitter off, so serve limits are exact."""
    defaults = {"python-backend": 0, "sql-data": 0, "javascript-frontend": 0}
    languages = {"python-backend": "python", "sql-data": "sql", "javascript-frontend": "javascript"}
    return {
        "tracks": {"backend-engineer": ["python-backend", "sql-data"]},
        "domains": {
            name: {
                "kind": "technical",
                "language": languages[name],
                "target": targets.get(name.replace("-", "_"), target),
                "retire_jitter": False,
            }
            for name, target in defaults.items()
        },
    }


def parsed(**targets: int) -> DomainMap:
    return domains.parse(domain_map(**targets), "test map")


def replenisher(
    pool: asyncpg.Pool,
    the_map: DomainMap,
    *,
    max_per_pass: int = 100,
    limits: admission.AdmissionLimits = LIMITS,
) -> Replenisher:
    return Replenisher(
        pool, the_map, limits, max_per_pass=max_per_pass, heartbeat_timeout=HEARTBEAT_TIMEOUT
    )


def enqueued(result: ReplenishPass) -> dict[str, int]:
    return {each.domain: len(each.enqueued) for each in result.domains if each.enqueued}


async def replenish_jobs(pool: asyncpg.Pool) -> dict[str, int]:
    rows = await pool.fetch(
        "SELECT domain, count(*) FROM generation_jobs WHERE lane = 'replenish' GROUP BY domain"
    )
    return {row["domain"]: row["count"] for row in rows}


class Stocking:
    """Every generation stores an approved mission of its job's domain, reviewed `review`
    after its job was created."""

    def __init__(self, review: timedelta) -> None:
        self._review = review

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Ending:
        async def store(connection: Connection) -> Finished:
            mission = await add_mission(
                connection,
                job.domain,
                job_id=job.id,
                reviewed_at=job.created_at + self._review,
            )
            return Finished(status="completed", mission_id=mission)

        return store


def worker_and_dispatcher(
    pool: asyncpg.Pool, generator: Generator, *, cap: int, replenish_cap: int
) -> tuple[Worker, Dispatcher]:
    worker = Worker(pool, generator, name="test-worker", capacity=cap)
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    return worker, Dispatcher(pool, worker, sweeper, global_cap=cap, replenish_cap=replenish_cap)


async def test_a_pool_drained_by_serves_is_refilled_to_target(pool: asyncpg.Pool) -> None:
    the_map = parsed(python_backend=4)
    now = datetime.now(UTC)
    for _ in range(4):
        await add_mission(pool, "python-backend", max_serves=2)
    engineers = the_map.domains_for("backend-engineer")
    async with pool.acquire() as connection:
        for user in range(8):
            async with connection.transaction():
                served = await serving.serve(
                    connection,
                    user_id=f"user-{user}",
                    track="backend-engineer",
                    domains=engineers,
                    now=now - 10 * MINUTE,
                )
            assert served is not None
    drained = {
        each.domain: each
        for each in (
            await stats.read(pool, the_map, heartbeat_timeout=HEARTBEAT_TIMEOUT, now=now)
        ).domains
    }
    assert drained["python-backend"].approved == 0

    first = await replenisher(pool, the_map).run_once(now)
    # The floor of 4 missions at the prior pass rate, which covers the demand too: 8 serves
    # in the last hour, over a 2 h lead time, are 16 + 6.6 serves, a third of one mission.
    assert enqueued(first) == {"python-backend": math.ceil(4 / PRIOR_PASS)} == {"python-backend": 6}

    worker, dispatcher = worker_and_dispatcher(
        pool, Stocking(review=30 * MINUTE), cap=10, replenish_cap=10
    )
    assert len(await dispatcher.run_once()) == 6
    assert await worker.drain(None)

    later = now + 2 * timedelta(hours=1)
    refilled = {
        each.domain: each
        for each in (
            await stats.read(pool, the_map, heartbeat_timeout=HEARTBEAT_TIMEOUT, now=later)
        ).domains
    }
    backend = refilled["python-backend"]
    assert backend.approved == 6 >= backend.target
    assert backend.forecast.lead_time_p90_s == 30 * 60, "six approvals measured the lead time"
    assert backend.forecast.pass_rate > PRIOR_PASS, "six successes raised the pass rate"
    assert backend.forecast.deficit == 0
    assert enqueued(await replenisher(pool, the_map).run_once(later)) == {}


async def test_two_passes_at_the_same_moment_enqueue_one_set(pool: asyncpg.Pool) -> None:
    the_map = parsed(python_backend=4, sql_data=2)
    now = datetime.now(UTC)
    results = await asyncio.gather(*(replenisher(pool, the_map).run_once(now) for _ in range(4)))
    one_set = {"python-backend": 6, "sql-data": 3}
    assert await replenish_jobs(pool) == one_set
    totals: dict[str, int] = {}
    for result in results:
        for name, count in enqueued(result).items():
            totals[name] = totals.get(name, 0) + count
    assert totals == one_set
    assert sum(1 for result in results if enqueued(result)) == 1


async def test_two_processes_at_the_same_moment_enqueue_one_set(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    map_file = tmp_path / "domain_map.yaml"
    map_file.write_text(yaml.safe_dump(domain_map(python_backend=4, sql_data=2)))
    barrier = await asyncpg.connect(database_url)
    try:
        # Both processes connect, then wait on this lock, so they start their passes together.
        await barrier.execute("SELECT pg_advisory_lock($1)", BARRIER_LOCK)
        processes = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.support.replenish_process",
                str(map_file),
                cwd=ROOT,
                env=environment(database_url, {"WARMPOOL_REPLENISH_MAX_PER_PASS": "10"}),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for _ in range(2)
        ]

        async def both_waiting() -> int | bool:
            waiting = int(
                await barrier.fetchval(
                    """SELECT count(*) FROM pg_locks
                       WHERE locktype = 'advisory' AND NOT granted
                         AND database = (
                             SELECT oid FROM pg_database WHERE datname = current_database()
                         )"""
                )
            )
            if any(process.returncode is not None for process in processes):
                return -1  # one ended early: its output says why
            return waiting if waiting == 2 else False

        waiting = await eventually(both_waiting, 30, "both processes at the barrier")
        await barrier.execute("SELECT pg_advisory_unlock($1)", BARRIER_LOCK)
    finally:
        await barrier.close()
    answers = [await asyncio.wait_for(process.communicate(), 60) for process in processes]
    assert waiting == 2, answers
    assert [process.returncode for process in processes] == [0, 0], answers
    results = [
        msgspec.json.decode(out, type=ReplenishPass, dec_hook=lambda kind, value: kind(value))
        for out, _ in answers
    ]
    assert await replenish_jobs(pool) == {"python-backend": 6, "sql-data": 3}
    assert sorted(sum(len(each.enqueued) for each in r.domains) for r in results) == [0, 9]


async def test_the_keys_dedupe_a_pass_over_the_same_state(pool: asyncpg.Pool) -> None:
    the_map = parsed(python_backend=4)
    first = await replenisher(pool, the_map).run_once()
    assert enqueued(first) == {"python-backend": 6}
    # A second pass that saw what the first one saw (as one that counted before the first
    # committed would, but for the lock) makes the same keys, and orders nothing.
    await pool.execute("DELETE FROM generation_jobs")
    again = await replenisher(pool, the_map).run_once()
    assert [(each.domain, each.deficit, each.enqueued) for each in again.domains] == [
        ("python-backend", 6, [])
    ]
    assert await replenish_jobs(pool) == {}
    keys = await pool.fetch("SELECT key FROM idempotency_keys WHERE caller = 'replenisher'")
    assert sorted(row["key"] for row in keys) == [
        f"python-backend:after-job-0:slot-{slot}" for slot in range(6)
    ]


async def test_the_growth_cap_holds_per_domain_and_pass(pool: asyncpg.Pool) -> None:
    the_map = parsed(python_backend=20, sql_data=2)
    capped = replenisher(pool, the_map, max_per_pass=3)
    first = await capped.run_once()
    deficits = {each.domain: each.deficit for each in first.domains}
    assert deficits == {"python-backend": math.ceil(20 / PRIOR_PASS), "sql-data": 3}
    assert enqueued(first) == {"python-backend": 3, "sql-data": 3}
    second = await capped.run_once()
    assert enqueued(second) == {"python-backend": 3}, "sql-data's three are under way"
    assert await replenish_jobs(pool) == {"python-backend": 6, "sql-data": 3}


async def test_an_unreachable_domain_is_never_replenished(pool: asyncpg.Pool) -> None:
    the_map = parsed(javascript_frontend=5)
    result = await replenisher(pool, the_map).run_once()
    assert result.ran
    assert result.domains == []
    frontend = next(
        each
        for each in (await stats.read(pool, the_map, heartbeat_timeout=HEARTBEAT_TIMEOUT)).domains
        if each.domain == "javascript-frontend"
    )
    assert (frontend.reachable, frontend.forecast.deficit) == (False, 0)


async def test_only_domains_that_a_live_worker_can_make_are_replenished(
    pool: asyncpg.Pool, database_url: str
) -> None:
    the_map = parsed(python_backend=2, sql_data=2)
    await pool.execute("DELETE FROM workers")
    assert enqueued(await replenisher(pool, the_map).run_once()) == {}, "no worker is running"
    await standing_worker(
        database_url, "no-pgtap", domains=["python-backend"], disabled={"sql-data": "no pgTAP"}
    )
    assert set(enqueued(await replenisher(pool, the_map).run_once())) == {"python-backend"}
    # Whichever process leads the pass: what counts is what the live workers can make.
    await standing_worker(database_url, "with-pgtap", domains=["python-backend", "sql-data"])
    assert set(enqueued(await replenisher(pool, the_map).run_once())) == {"sql-data"}


async def test_a_full_lane_sheds_the_pass_quietly(pool: asyncpg.Pool) -> None:
    the_map = parsed(python_backend=4, sql_data=2)
    limits = admission.AdmissionLimits(user_cap=3, max_pending=200, replenish_max_pending=4)
    result = await replenisher(pool, the_map, limits=limits).run_once()
    # The least covered first; both are empty, so the map's order.
    assert [(each.domain, len(each.enqueued), each.shed) for each in result.domains] == [
        ("python-backend", 4, True),
        ("sql-data", 0, True),
    ]
    assert await replenish_jobs(pool) == {"python-backend": 4}
    await enqueue(pool, "waiting-user", limits=limits)  # a user still finds room


async def test_under_a_saturated_queue_interactive_jobs_are_enqueued_and_claimed(
    pool: asyncpg.Pool,
) -> None:
    settings = Settings(global_cap=4, max_pending=10, replenish_share=0.5)
    limits = queue_limits(settings)
    assert (settings.replenish_cap, limits.replenish_max_pending) == (2, 5)
    the_map = parsed(python_backend=20)
    refill = replenisher(pool, the_map, limits=limits)
    gate = Gated()
    worker, dispatcher = worker_and_dispatcher(
        pool, gate, cap=settings.global_cap, replenish_cap=settings.replenish_cap
    )

    assert enqueued(await refill.run_once()) == {"python-backend": 5}
    assert [job.lane for job in await dispatcher.run_once()] == ["replenish"] * 2
    refilled = await refill.run_once()
    assert (enqueued(refilled), refilled.domains[0].shed) == ({"python-backend": 2}, True)
    assert await dispatcher.run_once() == [], "the lane holds its whole share of the cap"

    users = [await enqueue(pool, f"user-{index}", limits=limits) for index in range(3)]
    claimed = await dispatcher.run_once()
    assert [(job.id, job.lane) for job in claimed] == [
        (users[0], "interactive"),
        (users[1], "interactive"),
    ]
    shed = await refill.run_once()
    assert enqueued(shed) == {}
    assert shed.domains[0].shed
    gate.release()
    assert await worker.drain(None)


async def test_a_worker_runs_a_pass_when_it_starts_then_on_its_interval(
    pool: asyncpg.Pool, database_url: str, settings: Settings
) -> None:
    the_map = parsed(sql_data=2)
    runtime = WorkerRuntime(
        pool,
        database_url,
        settings,
        Gated(),
        capabilities=EVERY_DOMAIN,
        replenisher=services.replenisher(pool, settings, the_map),
    )
    await runtime.start()
    try:
        await eventually(lambda: replenish_jobs(pool), 10, "the first replenishment pass")
    finally:
        await runtime.stop()
    assert await replenish_jobs(pool) == {"sql-data": 3}


class FailsFirst(Replenisher):
    """A pass that crashes with a bug's error the first time, then runs as usual."""

    failed = False

    async def run_once(self, now: datetime | None = None) -> ReplenishPass:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a bug in the first pass")
        return await super().run_once(now)


async def test_a_pass_that_crashes_runs_again_at_its_next_turn(
    pool: asyncpg.Pool, database_url: str, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    replenisher = FailsFirst(
        pool,
        parsed(sql_data=2),
        queue_limits(settings),
        max_per_pass=settings.replenish_max_per_pass,
        heartbeat_timeout=settings.heartbeat_timeout,
    )
    runtime = WorkerRuntime(
        pool,
        database_url,
        msgspec.structs.replace(settings, replenish_seconds=0.2),
        Gated(),
        capabilities=EVERY_DOMAIN,
        replenisher=replenisher,
    )
    await runtime.start()
    try:
        await eventually(lambda: replenish_jobs(pool), 10, "a pass after the crashed one")
    finally:
        await runtime.stop()
    assert replenisher.failed
    assert "a bug in the first pass" in caplog.text
    assert await replenish_jobs(pool) == {"sql-data": 3}


async def test_the_demand_count_reads_recent_instances_through_their_index(
    pool: asyncpg.Pool,
) -> None:
    now = datetime.now(UTC)
    async with pool.acquire() as connection, connection.transaction():
        # The tables are tiny here: make the planner show whether the index can serve.
        await connection.execute("SET LOCAL enable_seqscan = off")
        plan = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + stats.queries["serves_by_domain"],
            ["python-backend"],
            now - timedelta(hours=1),
            now - timedelta(days=1),
            now,
        )
    assert "mission_instances_domain_created" in str(plan)
