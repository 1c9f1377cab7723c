"""The chaos run, shared by the test command's short form (tests/chaos/test_chaos.py) and the
long form (bench/chaos.py): API processes and workers of the real command line on one private
PostgreSQL, jobs over HTTP whose model calls go to the loopback OpenAI stub through the real
openai provider as background calls, and meanwhile the database's default
isolation set to REPEATABLE READ, warmpool's sessions terminated twice a second for a while,
one PostgreSQL restart, workers killed with SIGKILL at random moments (each replaced) and one
rolling restart with SIGTERM. Then the system drains, and the run reports what the tables and
the sampler saw, with every breach of the queue's promises.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from itertools import zip_longest
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx

from core.sql import DATABASE_ERRORS
from tests.chaos.cluster import Cluster, Place
from tests.chaos.faults import (
    ISOLATION_DEFAULT,
    OBSERVER_SETTINGS,
    connect_observer,
    default_to_repeatable_read,
    terminate_sessions,
)
from tests.chaos.load import Load, Pace
from tests.chaos.recovery import Recovery, back_to_rate
from tests.chaos.report import Kill, Report
from tests.chaos.sampler import Sampler
from tests.chaos.scenario import DOMAIN_MAP, Scenario
from tests.chaos.verdict import Verdict, ending_of, judge, served_calls
from tests.support.openai_stub import stub_process
from tests.support.polling import eventually
from tests.support.private_postgres import PrivatePostgres
from tests.support.server import create_keys

# The workers that claimed a job since a moment of the database's clock. A claim sets
# started_at and worker_id, and only a release (at a worker's stop) clears them.
CLAIMED_SINCE = """
SELECT coalesce(array_agg(DISTINCT worker_id), '{}') FROM generation_jobs
WHERE started_at >= $1::timestamptz
"""

# The pool's first replenishment: the workers order it as they start, and its python proofs
# would load the machine while the load begins.
REPLENISHED = """
SELECT count(*) > 0 AND count(*) FILTER (WHERE status IN ('pending', 'generating')) = 0
FROM generation_jobs WHERE lane = 'replenish'
"""

# How long the stuck check watches at least, once it begins, before the next fault may come.
STUCK_WATCH_SECONDS = 1.0
# The load's pace is measured over this long before the PostgreSQL stop and after its start.
AROUND_RESTART_SECONDS = 5.0
# The restart comes under a steady load: once the load has kept this share of its plan over
# the seconds above, or once this many seconds of waiting for it have passed.
STEADY_SHARE = 0.95
STEADY_WAIT_SECONDS = 30.0
# Below this share of its plan then, the run did not restart PostgreSQL under its load.
LOADED_SHARE = 0.8

T = TypeVar("T")


async def run(scenario: Scenario, log_dir: Path) -> Report:
    postgres = await asyncio.to_thread(PrivatePostgres)
    try:
        await asyncio.to_thread(postgres.start)
        if scenario.model == "offline":
            return await _run_on(postgres, None, scenario, log_dir)
        # Each response takes the model's time; every job's mission is its own.
        with stub_process(
            log_dir / "openai-stub.log", response_seconds=scenario.model_delay
        ) as stub:
            return await _run_on(postgres, stub, scenario, log_dir)
    finally:
        await asyncio.to_thread(postgres.remove)


async def _run_on(
    postgres: PrivatePostgres, stub: str | None, scenario: Scenario, log_dir: Path
) -> Report:
    """`stub`: the OpenAI stub's address; None: the offline provider."""
    keys = await create_keys(await postgres.fresh_database())
    domain_map = log_dir / "domain_map.yaml"
    domain_map.write_text(DOMAIN_MAP)
    settings = {**scenario.settings(), "WARMPOOL_DOMAIN_MAP": str(domain_map)}
    if stub is not None:
        settings |= {
            "OPENAI_API_KEY": "sk-chaos",
            "OPENAI_BASE_URL": stub,
            "WARMPOOL_OPENAI_CALLS": "background",
        }
    cluster = Cluster.plan(
        postgres.url, settings, log_dir, apis=scenario.apis, workers=scenario.workers
    )
    # No connection floor to restore after the PostgreSQL restart: connections are made on use.
    database = await asyncpg.create_pool(
        postgres.url, min_size=0, max_size=3, ssl=False, server_settings=OBSERVER_SETTINGS
    )
    try:
        await cluster.start_all()
        await eventually(lambda: database.fetchval(REPLENISHED), 60, "the first replenishment")
        report = await Chaos(scenario, cluster, postgres, database, stub).run(keys["candidate_app"])
    finally:
        stopped_badly = await cluster.stop_all()
        await database.close()
    report.problems += stopped_badly
    return report


class Chaos:
    """The load, the sampler and the chaos events (one at a time, at random moments within
    the load's time), then the drain and the verdict."""

    def __init__(
        self,
        scenario: Scenario,
        cluster: Cluster,
        postgres: PrivatePostgres,
        database: asyncpg.Pool,
        stub: str | None,
    ) -> None:
        self.scenario = scenario
        self.stub = stub
        self.cluster = cluster
        self.postgres = postgres
        self.database = database
        self.rng = random.Random(scenario.seed)
        self.sampler = Sampler(postgres.url, allowances=scenario.allowances)
        self.kills: list[Kill] = []
        self.rolled: list[str] = []
        self.postgres_restarts = 0
        self.recovered_in: float | None = None
        # From the PostgreSQL stop's start to the moment it answered again.
        self.restarted: tuple[float, float] | None = None
        self.terminated = 0
        # What a session made after the default changed began its transactions in.
        self.isolation: str | None = None
        self.recoveries: list[Recovery] = []
        # The load of the run under way.
        self._load: Load | None = None
        self.problems: list[str] = []
        self._starting: list[asyncio.Task[None]] = []
        self._started = time.monotonic()

    def _say(self, event: str) -> None:
        """A line of the run's timeline (shown by the test when it fails)."""
        print(f"{time.monotonic() - self._started:7.1f}s  {event}", flush=True)

    async def run(self, api_key: str) -> Report:
        s = self.scenario
        load = Load(
            [place.url for place in self.cluster.apis],
            api_key,
            s.offers(),
            s.seconds,
            concurrency=s.lanes,
            seed=s.seed,
        )
        self._load = load
        stop_sampling = asyncio.Event()
        sampling = asyncio.create_task(self.sampler.run(stop_sampling))
        self._started = time.monotonic()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._offer(load))
                group.create_task(self._events())
            await self._drain()
        finally:
            stop_sampling.set()
            await sampling
        for recovery in self.recoveries:
            recovery.assess(
                self.sampler.oldest,
                self.sampler.ended,
                bound=s.reclaim_bound,
                share=s.recovery_share,
                window=s.rate_window,
                ended_by=time.monotonic(),
            )
        served = None if self.stub is None else await served_calls(self.stub)
        verdict = await judge(self.database, load.accepted, served)
        held = [job for kill in self.kills for job in kill.held]
        ended = {
            row["id"]: ending_of(row["status"], row["error"])
            for row in await self.database.fetch(
                "SELECT id, status, error FROM generation_jobs WHERE id = ANY($1::bigint[])", held
            )
        }
        for kill in self.kills:
            kill.endings = dict(Counter(ended[job] for job in kill.held))
        pace = self._restart_pace(load)
        return Report(
            scenario=s,
            verdict=verdict,
            load=load,
            sampler=self.sampler,
            kills=self.kills,
            rolled=self.rolled,
            postgres_restarts=self.postgres_restarts,
            recovered_in=self.recovered_in,
            restart_pace=pace,
            terminated=self.terminated,
            isolation=self.isolation,
            recoveries=self.recoveries,
            seconds=time.monotonic() - self._started,
            problems=self._problems(verdict, load) + self._recovery_problems(pace),
        )

    async def _offer(self, load: Load) -> None:
        self._say(f"offering {len(load.offers)} jobs over {self.scenario.seconds:g}s")
        await load.run()
        self._say(f"the API accepted {len(load.accepted)} jobs")

    async def _events(self) -> None:
        """The database's default isolation changed first, so that the sessions which the
        PostgreSQL restart and the terminations make warmpool open anew begin under it; then the
        restart, while the load is still steady and so that the workers have jobs to claim
        after it; then the terminations; then the kills and the rolling restart in a random
        order. Each event comes at a random moment of its own share of the first 60% of the
        load's time, so that the last one still finds work; one that overran its share delays
        the next; the restart and the terminations wait for the system to recover before the
        next (see _recovering).
        """
        events: list[Callable[[], Awaitable[None]]] = [self._kill] * self.scenario.kills
        events.append(self._rolling_restart)
        self.rng.shuffle(events)
        events[:0] = [
            self._default_to_repeatable_read,
            self._restart_postgres,
            self._terminate_sessions,
        ]
        share = 0.6 * self.scenario.seconds / len(events)
        started = time.monotonic()
        try:
            for index, event in enumerate(events):
                at = started + share * (index + self.rng.uniform(0.1, 0.9))
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                await self._successors_ready()
                self._stuck_checks_end()
                await event()
            await self._successors_ready()
        finally:
            # When the run fails, no successor may start after the cluster has been stopped.
            for task in self._starting:
                task.cancel()

    async def _successors_ready(self) -> None:
        """A killed worker's successor starts while its jobs are reclaimed and until the next
        event, which finds every place held by a ready process."""
        starting, self._starting = self._starting, []
        await asyncio.gather(*starting)

    async def _kill(self) -> None:
        place = await self._worker_holding_jobs()
        worker_id = place.worker_id
        killed_at = await self.cluster.kill(place)
        reclaim = self.sampler.watch(worker_id, killed_at)
        held = await self._query(
            """SELECT coalesce(array_agg(id), '{}') FROM generation_jobs
               WHERE status = 'generating' AND worker_id = $1""",
            worker_id,
        )
        self._say(f"SIGKILL {worker_id}, holding jobs {held}")
        self._starting.append(asyncio.create_task(self._succeed(place)))
        await self.sampler.reclaimed(reclaim, within=self.scenario.reclaim_bound + 30)
        after = "never" if reclaim.seconds is None else f"{reclaim.seconds:.2f}s after the kill"
        self._say(f"{worker_id}'s jobs reclaimed: {after}")
        self.kills.append(Kill(worker_id, held, reclaim))

    async def _succeed(self, place: Place) -> None:
        # At a random moment: its reconcile may come before or after the sweeper's turn.
        await asyncio.sleep(self.rng.uniform(0, self.scenario.heartbeat_timeout))
        await self.cluster.replace(place)
        self._say(f"{place.worker_id} took its place")

    async def _worker_holding_jobs(self) -> Place:
        """A random worker among those holding jobs; any worker if none does for a while."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            holding = [p for p in self.cluster.workers if p.worker_id in self.sampler.holders]
            if holding:
                return self.rng.choice(holding)
            await asyncio.sleep(0.02)
        return self.rng.choice(self.cluster.workers)

    async def _rolling_restart(self) -> None:
        apis, workers = self.cluster.apis, self.cluster.workers
        in_turn = [place for pair in zip_longest(apis, workers) for place in pair if place]
        for place in in_turn[: self.scenario.rolling]:
            stopping = place.pid
            stopped_badly = await self.cluster.terminate(place)
            if stopped_badly:
                self.problems.append(f"in the rolling restart: {stopped_badly}")
            await self.cluster.replace(place)
            self._say(f"rolling restart: {place.name} pid {stopping} stopped, {place.pid} ready")
            self.rolled.append(place.name)

    async def _default_to_repeatable_read(self) -> None:
        await self._retried(default_to_repeatable_read)
        # A session made now must begin in it, or the phase would test nothing.
        connection = await connect_observer(self.postgres.url)
        try:
            self.isolation = await connection.fetchval("SHOW transaction_isolation")
        finally:
            await connection.close()
        self._say(f"the database's default isolation set: new sessions begin in {self.isolation}")

    async def _terminate_sessions(self) -> None:
        s = self.scenario
        rounds = int(s.terminate_seconds / s.terminate_every) + 1
        started = time.monotonic()
        for index in range(rounds):
            await asyncio.sleep(max(0.0, started + index * s.terminate_every - time.monotonic()))
            self.terminated += await self._retried(terminate_sessions)
        stopped = time.monotonic()
        self._say(f"{self.terminated} sessions terminated in {rounds} rounds")
        await self._recovering("session terminations", started, stopped)

    async def _restart_postgres(self) -> None:
        await self._steady_load()
        stopping = time.monotonic()
        await asyncio.to_thread(self.postgres.stop)
        self._say("PostgreSQL stopped (immediate)")
        await asyncio.sleep(self.scenario.postgres_down)
        await asyncio.to_thread(self.postgres.start)
        self._say("PostgreSQL started")
        restarted = time.monotonic()
        self.restarted = (stopping, restarted)
        self.postgres_restarts += 1
        await self._recovered(restarted)
        await self._recovering("PostgreSQL restart", stopping, restarted)

    async def _steady_load(self) -> None:
        """Until the load has kept STEADY_SHARE of its plan over the last seconds, or until
        STEADY_WAIT_SECONDS have passed."""
        s = self.scenario
        deadline = time.monotonic() + STEADY_WAIT_SECONDS
        while (offered := self._offered_before(time.monotonic())) < STEADY_SHARE * s.rate:
            if time.monotonic() > deadline:
                self._say(f"the load is not steady: {offered:.1f} jobs/s offered")
                return
            await asyncio.sleep(0.1)
        self._say(f"the load is steady: {offered:.1f} jobs/s offered")

    def _offered_before(self, moment: float) -> float:
        assert self._load is not None, "a run is under way"
        return self._load.pace(moment, moment, AROUND_RESTART_SECONDS).offered_before

    async def _recovering(self, fault: str, began_at: float, stopped_at: float) -> None:
        """The next fault waits until completions are back to the rate offered before it and
        the stuck check has watched for a while, or until the time allowed for both has
        passed."""
        s = self.scenario
        recovery = Recovery(fault, began_at, stopped_at, self._offered_before(began_at))
        self.recoveries.append(recovery)
        watched = stopped_at + s.reclaim_bound + STUCK_WATCH_SECONDS
        deadline = max(watched, stopped_at + s.recovery_within)
        back: float | None = None
        while time.monotonic() < deadline:
            back = back_to_rate(
                self.sampler.ended, stopped_at, s.recovery_share * recovery.offered, s.rate_window
            )
            if back is not None and time.monotonic() >= watched:
                break
            await asyncio.sleep(0.1)
        after = "not" if back is None else f"{back:.1f}s after the {fault}"
        self._say(
            f"completions back to {s.recovery_share:.0%} of the {recovery.offered:.1f} jobs/s "
            f"offered before: {after}"
        )

    def _stuck_checks_end(self) -> None:
        """A fault begins: the stuck check of the one before ends."""
        for recovery in self.recoveries:
            if recovery.until is None:
                recovery.until = time.monotonic()

    def _restart_pace(self, load: Load) -> Pace | None:
        if self.restarted is None:
            return None
        return load.pace(*self.restarted, AROUND_RESTART_SECONDS)

    async def _recovered(self, restarted: float, within: float = 30) -> None:
        """Every process works again: each API process answers ready, and each worker claims
        a job (an idle worker is not trusted to have recovered until it does)."""
        since = await self._query("SELECT now()")
        waiting = {place.worker_id for place in self.cluster.workers}
        ready: list[bool] = []
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < restarted + within:
                waiting -= set(await self._query(CLAIMED_SINCE, since))
                ready = [await _ready(client, place.url) for place in self.cluster.apis]
                if not waiting and all(ready):
                    self.recovered_in = time.monotonic() - restarted
                    self._say(f"every process working again {self.recovered_in:.1f}s later")
                    return
                await asyncio.sleep(0.05)
        self.problems.append(
            f"not working {within:g}s after the PostgreSQL restart: workers {sorted(waiting)} "
            f"claimed nothing, API processes ready: {ready}"
        )

    async def _query(self, query: str, *arguments: object) -> Any:
        """One value; the pool's connections broken by the restart are made again."""
        return await self._retried(lambda database: database.fetchval(query, *arguments))

    async def _retried(self, use: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
        for _ in range(100):
            try:
                return await use(self.database)
            except DATABASE_ERRORS:
                await asyncio.sleep(0.1)
        return await use(self.database)

    async def _drain(self) -> None:
        deadline = time.monotonic() + self.scenario.drain_within
        while time.monotonic() < deadline:
            left = await self._query(
                "SELECT count(*) FROM generation_jobs WHERE status IN ('pending', 'generating')"
            )
            if left == 0:
                self._say("drained: no job pending or generating")
                return
            await asyncio.sleep(0.2)
        self._say(f"not drained after {self.scenario.drain_within:g}s")

    def _problems(self, verdict: Verdict, load: Load) -> list[str]:
        s = self.scenario
        problems = [*self.problems, *load.problems, *verdict.problems, *self.cluster.exited()]
        if len(load.accepted) != s.jobs:
            problems.append(f"the API accepted {len(load.accepted)} of {s.jobs} jobs")
        if not 0 < self.sampler.highest <= s.global_cap:
            problems.append(f"{self.sampler.highest} jobs in flight at most, cap {s.global_cap}")
        if self.kills and not any(kill.held for kill in self.kills):
            problems.append("no kill caught a worker holding jobs: no reclaim was seen")
        for kill in self.kills:
            seconds = kill.reclaim.seconds
            if seconds is None or seconds > s.reclaim_bound:
                problems.append(
                    f"the jobs of killed worker {kill.worker_id} were reclaimed after "
                    f"{seconds}s, beyond {s.reclaim_bound:g}s"
                )
        if self.isolation != ISOLATION_DEFAULT:
            problems.append(f"a new session began in {self.isolation}, not {ISOLATION_DEFAULT}")
        if self.terminated == 0:
            problems.append("the terminations found no session of warmpool's to end")
        return problems

    def _recovery_problems(self, pace: Pace | None) -> list[str]:
        s = self.scenario
        problems = []
        for r in self.recoveries:
            if r.oldest is None:
                problems.append(f"after the {r.fault}: no sample of the generating jobs")
            elif r.oldest.age > s.reclaim_bound:
                problems.append(
                    f"after the {r.fault}: job {r.oldest.job_id} generating for "
                    f"{r.oldest.age:.2f}s beyond its domain's time from {s.reclaim_bound:g}s "
                    f"after it on, beyond {s.reclaim_bound:g}s"
                )
            if r.back_in is None or r.back_in > s.recovery_within:
                after = "never" if r.back_in is None else f"after {r.back_in:.2f}s"
                problems.append(
                    f"after the {r.fault}: completions back to {s.recovery_share:.0%} of the "
                    f"{r.offered:.1f} jobs/s offered before it {after}, not within "
                    f"{s.recovery_within:g}s"
                )
        if pace is not None and pace.offered_before < LOADED_SHARE * s.rate:
            problems.append(
                f"the load offered {pace.offered_before:.1f} jobs/s before the PostgreSQL "
                f"restart, below {LOADED_SHARE:.0%} of its {s.rate:g} jobs/s: no steady load"
            )
        return problems


async def _ready(client: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await client.get(f"{url}/readyz")).status_code == 200
    except httpx.TransportError:
        return False
