"""The chaos run, shared by the test command's short form (tests/chaos/test_chaos.py) and the
long form (bench/chaos.py): API processes and workers of the real command line on one private
PostgreSQL, jobs through the offline provider over HTTP, and meanwhile workers killed with
SIGKILL at random moments (each replaced), one rolling restart with SIGTERM and one PostgreSQL
restart. Then the system drains, and the run reports what the tables and the sampler saw, with
every breach of the queue's promises.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from itertools import zip_longest
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from core.sql import DATABASE_ERRORS
from tests.chaos.cluster import Cluster, Place
from tests.chaos.load import Load
from tests.chaos.report import Kill, Report
from tests.chaos.sampler import Sampler
from tests.chaos.scenario import DOMAIN_MAP, Scenario
from tests.chaos.verdict import Verdict, ending_of, judge
from tests.support.private_postgres import PrivatePostgres
from tests.support.server import create_keys

# The workers that claimed a job since a moment of the database's clock. A claim sets
# started_at and worker_id, and only a release (at a worker's stop) clears them.
CLAIMED_SINCE = """
SELECT coalesce(array_agg(DISTINCT worker_id), '{}') FROM generation_jobs
WHERE started_at >= $1::timestamptz
"""


async def run(scenario: Scenario, log_dir: Path) -> Report:
    postgres = await asyncio.to_thread(PrivatePostgres)
    try:
        await asyncio.to_thread(postgres.start)
        return await _run_on(postgres, scenario, log_dir)
    finally:
        await asyncio.to_thread(postgres.remove)


async def _run_on(postgres: PrivatePostgres, scenario: Scenario, log_dir: Path) -> Report:
    keys = await create_keys(await postgres.fresh_database())
    domain_map = log_dir / "domain_map.yaml"
    domain_map.write_text(DOMAIN_MAP)
    settings = {**scenario.settings(), "WARMPOOL_DOMAIN_MAP": str(domain_map)}
    cluster = Cluster.plan(
        postgres.url, settings, log_dir, apis=scenario.apis, workers=scenario.workers
    )
    # No connection floor to restore after the PostgreSQL restart: connections are made on use.
    database = await asyncpg.create_pool(postgres.url, min_size=0, max_size=3)
    try:
        await cluster.start_all()
        report = await Chaos(scenario, cluster, postgres, database).run(keys["candidate_app"])
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
    ) -> None:
        self.scenario = scenario
        self.cluster = cluster
        self.postgres = postgres
        self.database = database
        self.rng = random.Random(scenario.seed)
        self.sampler = Sampler(postgres.url)
        self.kills: list[Kill] = []
        self.rolled: list[str] = []
        self.postgres_restarts = 0
        self.recovered_in: float | None = None
        self.problems: list[str] = []
        self._starting: list[asyncio.Task[None]] = []
        self._started = time.monotonic()

    def _say(self, event: str) -> None:
        """A line of the run's timeline (shown by the test when it fails)."""
        print(f"{time.monotonic() - self._started:7.1f}s  {event}", flush=True)

    async def run(self, api_key: str) -> Report:
        s = self.scenario
        load = Load(
            [place.url for place in self.cluster.apis], api_key, s.offers(), s.seconds, seed=s.seed
        )
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
        verdict = await judge(self.database, load.accepted)
        held = [job for kill in self.kills for job in kill.held]
        ended = {
            row["id"]: ending_of(row["status"], row["error"])
            for row in await self.database.fetch(
                "SELECT id, status, error FROM generation_jobs WHERE id = ANY($1::bigint[])", held
            )
        }
        for kill in self.kills:
            kill.endings = dict(Counter(ended[job] for job in kill.held))
        return Report(
            scenario=s,
            verdict=verdict,
            load=load,
            sampler=self.sampler,
            kills=self.kills,
            rolled=self.rolled,
            postgres_restarts=self.postgres_restarts,
            recovered_in=self.recovered_in,
            seconds=time.monotonic() - self._started,
            problems=self._problems(verdict, load),
        )

    async def _offer(self, load: Load) -> None:
        self._say(f"offering {len(load.offers)} jobs over {self.scenario.seconds:g}s")
        await load.run()
        self._say(f"the API accepted {len(load.accepted)} jobs")

    async def _events(self) -> None:
        """The PostgreSQL restart first, so that the workers have jobs to claim after it; then
        the kills and the rolling restart in a random order. Each event comes at a random
        moment of its own share of the first 60% of the load's time, so that the last one
        still finds work; one that overran its share delays the next.
        """
        events: list[Callable[[], Awaitable[None]]] = [self._kill] * self.scenario.kills
        events.append(self._rolling_restart)
        self.rng.shuffle(events)
        events.insert(0, self._restart_postgres)
        share = 0.6 * self.scenario.seconds / len(events)
        started = time.monotonic()
        try:
            for index, event in enumerate(events):
                at = started + share * (index + self.rng.uniform(0.1, 0.9))
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                await self._successors_ready()
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

    async def _restart_postgres(self) -> None:
        await asyncio.to_thread(self.postgres.stop)
        self._say("PostgreSQL stopped (immediate)")
        await asyncio.sleep(self.scenario.postgres_down)
        await asyncio.to_thread(self.postgres.start)
        self._say("PostgreSQL started")
        restarted = time.monotonic()
        self.postgres_restarts += 1
        await self._recovered(restarted)

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
        for _ in range(100):
            try:
                return await self.database.fetchval(query, *arguments)
            except DATABASE_ERRORS:
                await asyncio.sleep(0.1)
        return await self.database.fetchval(query, *arguments)

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
        return problems


async def _ready(client: httpx.AsyncClient, url: str) -> bool:
    try:
        return (await client.get(f"{url}/readyz")).status_code == 200
    except httpx.TransportError:
        return False
