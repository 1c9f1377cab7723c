"""Queue benchmark: warmpool's queue beside two baselines on the same Postgres, in one run.

    python bench/queue.py [--jobs 20000] [--cap 50] [--requests 2000] [--samples 200]
        [--enqueue-seconds 5] [--clients 32] [--depths 0,10000,100000] [--enqueues 4000]

Prints, each with its ratio to the baselines:
- throughput: claim-to-complete of N no-op jobs (warmpool with its exact global cap on;
  a bare FOR UPDATE SKIP LOCKED claim loop in raw asyncpg; pgqueuer), at the same concurrency;
- pickup latency: from the enqueue's commit to the job running, capacity free, p50 and p99;
- enqueue rate: warmpool's POST /v1/jobs over HTTP (from wrk, Debian's `wrk` package, to one
  API process), beside raw INSERTs and pgqueuer's enqueue;
- single enqueues into queues already 0, 10,000 and 100,000 deep: warmpool's enqueue with every
  check on (user lock, per-user cap, depth limit, fair turn, NOTIFY) beside pgqueuer's, each
  client its own connection.
Needs the bench extra: pip install -e '.[bench]'.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder would come first on sys.path and this file would shadow the
# standard library's `queue`; the project root goes there instead.
ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

import asyncpg
from pgqueuer import AsyncpgDriver, PgQueuer, Queries
from pgqueuer.models import Job
from pgqueuer.types import QueueExecutionMode

from bench.http_load import wrk
from bench.scratch import database_parser, fresh_database
from generation import admission
from generation.dispatcher import Dispatcher
from generation.finisher import Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.sweeper import Sweeper
from generation.worker import Worker
from server import migrate
from server.auth import create_key
from server.database import create_pool
from tests.support.fleet import standing_worker
from tests.support.server import running_server

BARE_SCHEMA = """
CREATE TABLE bare_jobs (id bigserial PRIMARY KEY, status text NOT NULL DEFAULT 'pending',
                        payload text NOT NULL DEFAULT '');
CREATE INDEX bare_jobs_pending ON bare_jobs (id) WHERE status = 'pending';
"""
BARE_CLAIM = """
UPDATE bare_jobs SET status = 'running'
WHERE id = (SELECT id FROM bare_jobs WHERE status = 'pending' ORDER BY id
            FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id
"""
BARE_DONE = "UPDATE bare_jobs SET status = 'done' WHERE id = $1"
MINUTE = timedelta(minutes=1)
NO_LIMITS = admission.AdmissionLimits(
    user_cap=1_000_000, max_pending=1_000_000, replenish_max_pending=1_000_000
)


class Signal:
    """A no-op generation that tells the benchmark when it started."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[float] = asyncio.Queue()

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        self.started.put_nowait(time.perf_counter())
        return Finished(status="completed")


def forget(started: asyncio.Queue[float]) -> None:
    """Drop start times left over from an earlier phase: each sample is its own job's."""
    while not started.empty():
        started.get_nowait()


# --- warmpool ---------------------------------------------------------------------------


class Warmpool:
    def __init__(self, url: str, cap: int) -> None:
        self.url, self.cap = url, cap

    async def __aenter__(self) -> Warmpool:
        self.pool = await create_pool(self.url, max_size=20)
        async with self.pool.acquire() as connection:
            await migrate.apply(connection)
        self.signal = Signal()
        self.worker = Worker(
            self.pool, self.signal, name="bench", capacity=self.cap, on_slot_freed=self._wake
        )
        sweeper = Sweeper(
            self.pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
        )
        self.dispatcher = Dispatcher(
            self.pool, self.worker, sweeper, global_cap=self.cap, replenish_cap=self.cap
        )
        self.listener = await asyncpg.connect(self.url)
        await self.listener.add_listener("warmpool_jobs", lambda *_: self._wake())
        return self

    def _wake(self) -> None:
        self.dispatcher.wake()

    async def __aexit__(self, *_: object) -> None:
        await self.worker.stop()
        await self.listener.close()
        await self.pool.close()

    async def drain(self, jobs: int) -> float:
        await self.pool.execute(
            "INSERT INTO generation_jobs (lane, domain, fair_time) SELECT 'replenish', 'bench', now() "
            "FROM generate_series(1, $1::int)",
            jobs,
        )
        await self.pool.execute("VACUUM ANALYZE generation_jobs")
        start = time.perf_counter()
        self._wake()
        for _ in range(jobs):
            await self.signal.started.get()
        while await self.pool.fetchval(
            "SELECT count(*) FROM generation_jobs WHERE status <> 'completed'"
        ):
            await asyncio.sleep(0.01)
        return jobs / (time.perf_counter() - start)

    async def pickup(self) -> float:
        forget(self.signal.started)
        async with self.pool.acquire() as connection:
            async with connection.transaction():
                await admission.enqueue(
                    connection,
                    lane="replenish",
                    user_id=None,
                    track=None,
                    domain="bench",
                    limits=NO_LIMITS,
                )
            committed = time.perf_counter()
            await admission.wake_dispatchers(connection)
        return await self.signal.started.get() - committed


# --- bare SKIP LOCKED loop --------------------------------------------------------------


class Bare:
    def __init__(self, url: str, concurrency: int) -> None:
        self.url, self.concurrency = url, concurrency

    async def __aenter__(self) -> Bare:
        self.pool = await asyncpg.create_pool(
            self.url, min_size=self.concurrency + 2, max_size=self.concurrency + 2
        )
        await self.pool.execute(BARE_SCHEMA)
        self.started: asyncio.Queue[float] = asyncio.Queue()
        self.work = asyncio.Event()
        self.stop = False
        self.listener = await asyncpg.connect(self.url)
        await self.listener.add_listener("bare_jobs", lambda *_: self.work.set())
        self.loops = [asyncio.create_task(self._loop()) for _ in range(self.concurrency)]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.stop = True
        self.work.set()
        await asyncio.gather(*self.loops)
        await self.listener.close()
        await self.pool.close()

    async def _loop(self) -> None:
        async with self.pool.acquire() as connection:
            while not self.stop:
                job = await connection.fetchval(BARE_CLAIM)
                if job is None:
                    self.work.clear()
                    await self.work.wait()
                    continue
                self.started.put_nowait(time.perf_counter())
                await connection.execute(BARE_DONE, job)

    async def drain(self, jobs: int) -> float:
        self.stop = True
        self.work.set()
        await asyncio.gather(*self.loops)
        await self.pool.execute(
            "INSERT INTO bare_jobs (payload) SELECT '' FROM generate_series(1, $1::int)", jobs
        )
        await self.pool.execute("VACUUM ANALYZE bare_jobs")
        self.stop = False
        start = time.perf_counter()
        self.loops = [asyncio.create_task(self._loop()) for _ in range(self.concurrency)]
        self.work.set()
        for _ in range(jobs):
            await self.started.get()
        while await self.pool.fetchval("SELECT count(*) FROM bare_jobs WHERE status <> 'done'"):
            await asyncio.sleep(0.01)
        return jobs / (time.perf_counter() - start)

    async def pickup(self) -> float:
        forget(self.started)
        async with self.pool.acquire() as connection:
            async with connection.transaction():
                await connection.execute("INSERT INTO bare_jobs DEFAULT VALUES")
                await connection.execute("NOTIFY bare_jobs")
            committed = time.perf_counter()  # before the pool's reset of the connection
        return await self.started.get() - committed


# --- pgqueuer ---------------------------------------------------------------------------


class Pgqueuer:
    def __init__(self, url: str, workers: int, batch: int) -> None:
        self.url, self.workers, self.batch = url, workers, batch

    async def __aenter__(self) -> Pgqueuer:
        self.connection = await asyncpg.connect(self.url)
        self.queries = Queries(AsyncpgDriver(self.connection))
        await self.queries.install()
        self.started: asyncio.Queue[float] = asyncio.Queue()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.connection.close()

    async def _consumers(self) -> list[PgQueuer]:
        consumers = []
        for _ in range(self.workers):
            consumer = PgQueuer(AsyncpgDriver(await asyncpg.connect(self.url)))

            @consumer.entrypoint("noop")
            async def noop(job: Job) -> None:
                self.started.put_nowait(time.perf_counter())

            consumers.append(consumer)
        return consumers

    async def drain(self, jobs: int) -> float:
        await self.queries.enqueue(["noop"] * jobs, [b""] * jobs, [0] * jobs)
        consumers = await self._consumers()
        start = time.perf_counter()
        await asyncio.gather(
            *(c.run(batch_size=self.batch, mode=QueueExecutionMode.drain) for c in consumers)
        )
        rate = jobs / (time.perf_counter() - start)
        self.started = asyncio.Queue()
        return rate

    async def run_consumers(self) -> Callable[[], Awaitable[None]]:
        consumers = await self._consumers()
        tasks = [asyncio.create_task(c.run(batch_size=self.batch)) for c in consumers]

        async def stop() -> None:
            for consumer in consumers:
                consumer.shutdown.set()
            await asyncio.gather(*tasks, return_exceptions=True)

        return stop

    async def pickup(self) -> float:
        forget(self.started)
        await self.queries.enqueue(["noop"], [b""], [0])  # one statement: committed on return
        committed = time.perf_counter()
        return await self.started.get() - committed


# --- the run ----------------------------------------------------------------------------


async def latencies(pickup: Callable[[], Awaitable[float]], samples: int) -> tuple[float, float]:
    seen = []
    for _ in range(samples):
        # A consumer in this process may start the job before the enqueuing task resumes
        # after its commit: that sample is 0.
        seen.append(max(0.0, await pickup()) * 1000)
        await asyncio.sleep(0.005)
    seen.sort()
    return statistics.median(seen), seen[int(len(seen) * 0.99) - 1]


async def raw_inserts(url: str, requests: int, clients: int) -> float:
    pool = await asyncpg.create_pool(url, min_size=clients, max_size=clients)
    numbers = iter(range(requests))

    async def client_loop() -> None:
        for _ in numbers:
            await pool.execute("INSERT INTO bare_jobs DEFAULT VALUES")

    start = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    rate = requests / (time.perf_counter() - start)
    await pool.close()
    return rate


async def pgqueuer_enqueues(url: str, requests: int, clients: int) -> float:
    connections = [await asyncpg.connect(url) for _ in range(clients)]
    numbers = iter(range(requests))

    async def client_loop(connection: asyncpg.Connection) -> None:
        queries = Queries(AsyncpgDriver(connection))
        for _ in numbers:
            await queries.enqueue(["noop"], [b""], [0])

    start = time.perf_counter()
    await asyncio.gather(*(client_loop(connection) for connection in connections))
    rate = requests / (time.perf_counter() - start)
    for connection in connections:
        await connection.close()
    return rate


async def warmpool_enqueues_at_depth(url: str, depth: int, enqueues: int, clients: int) -> float:
    pool = await create_pool(url, max_size=clients)
    async with pool.acquire() as connection:
        await migrate.apply(connection)
    await pool.execute(
        "INSERT INTO generation_jobs (lane, domain, fair_time) SELECT 'replenish', 'bench', now() "
        "FROM generate_series(1, $1::int)",
        depth,
    )
    await pool.execute("VACUUM ANALYZE generation_jobs")
    numbers = iter(range(enqueues))

    async def client_loop() -> None:
        async with pool.acquire() as connection:
            for number in numbers:
                async with connection.transaction():
                    await admission.enqueue(
                        connection,
                        lane="interactive",
                        user_id=f"user-{number}",
                        track="backend-engineer",
                        domain="bench",
                        limits=NO_LIMITS,
                    )
                await admission.wake_dispatchers(connection)

    start = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    rate = enqueues / (time.perf_counter() - start)
    await pool.close()
    return rate


async def pgqueuer_enqueues_at_depth(url: str, depth: int, enqueues: int, clients: int) -> float:
    connection = await asyncpg.connect(url)
    queries = Queries(AsyncpgDriver(connection))
    await queries.install()
    for start in range(0, depth, 10_000):
        batch = min(10_000, depth - start)
        await queries.enqueue(["noop"] * batch, [b""] * batch, [0] * batch)
    await connection.execute("VACUUM ANALYZE pgqueuer")
    await connection.close()
    return await pgqueuer_enqueues(url, enqueues, clients)


async def enqueues_by_depth(
    server: str, depths: list[int], enqueues: int, clients: int
) -> list[tuple[int, float, float]]:
    """Per depth: warmpool's and pgqueuer's single enqueues per second, each on a fresh queue
    filled to that depth first."""
    rates = []
    for depth in depths:
        ours = await warmpool_enqueues_at_depth(
            await fresh_database(server, "bench_queue_depth_warmpool"), depth, enqueues, clients
        )
        theirs = await pgqueuer_enqueues_at_depth(
            await fresh_database(server, "bench_queue_depth_pgqueuer"), depth, enqueues, clients
        )
        rates.append((depth, ours, theirs))
    return rates


def row(name: str, ours: float, bare: float, pgq: float, unit: str, higher_is_better: bool) -> None:
    def ratio(other: float) -> str:
        return f"{(ours / other if higher_is_better else other / ours):.2f}x"

    print(
        f"{name:<28} {ours:>10.1f} {bare:>10.1f} {pgq:>10.1f}  {unit:<7}"
        f" {ratio(bare):>10} {ratio(pgq):>12}"
    )


async def main(arguments: argparse.Namespace) -> None:
    server = arguments.database_url
    urls = {
        name: await fresh_database(server, f"bench_queue_{name}")
        for name in ("warmpool", "bare", "pgqueuer")
    }

    # Pickup first, on each empty queue, then the drain of the 20,000.
    async with Warmpool(urls["warmpool"], arguments.cap) as ours:
        ours_p50, ours_p99 = await latencies(ours.pickup, arguments.samples)
        ours_drain = await ours.drain(arguments.jobs)
    async with Bare(urls["bare"], arguments.cap) as bare:
        bare_p50, bare_p99 = await latencies(bare.pickup, arguments.samples)
        bare_drain = await bare.drain(arguments.jobs)
    async with Pgqueuer(urls["pgqueuer"], workers=arguments.cap // 10, batch=10) as pgq:
        stop = await pgq.run_consumers()
        pgq_p50, pgq_p99 = await latencies(pgq.pickup, arguments.samples)
        await stop()
        pgq_drain = await pgq.drain(arguments.jobs)

    keys = await asyncpg.connect(urls["warmpool"])
    key = await create_key(keys, "candidate_app", "bench")
    await keys.close()
    overrides = {"WARMPOOL_MAX_PENDING": "10000000", "WARMPOOL_USER_CAP": "1000"}
    # No worker runs: the jobs are enqueued as when one can make every domain.
    await standing_worker(urls["warmpool"])
    with running_server(urls["warmpool"], Path("/tmp"), overrides=overrides) as url:
        ours_http = await wrk(
            url,
            key,
            path="/v1/jobs",
            track="backend-engineer",
            clients=arguments.clients,
            seconds=arguments.enqueue_seconds,
            idempotent=True,
        )
    bare_inserts = await raw_inserts(urls["bare"], arguments.requests, arguments.clients)
    pgq_inserts = await pgqueuer_enqueues(urls["pgqueuer"], arguments.requests, arguments.clients)
    by_depth = await enqueues_by_depth(
        server, arguments.depths, arguments.enqueues, arguments.clients
    )

    print(
        f"\n{arguments.jobs} no-op jobs, concurrency {arguments.cap} (warmpool: global cap {arguments.cap},"
        f" counted from the table; pgqueuer: {arguments.cap // 10} consumers x batch 10), {os.cpu_count()} cores\n"
    )
    print(
        f"{'':<28} {'warmpool':>10} {'bare loop':>10} {'pgqueuer':>10}  {'unit':<7} {'vs bare':>10} {'vs pgqueuer':>12}"
    )
    row("throughput", ours_drain, bare_drain, pgq_drain, "jobs/s", higher_is_better=True)
    row("pickup latency p50", ours_p50, bare_p50, pgq_p50, "ms", higher_is_better=False)
    row("pickup latency p99", ours_p99, bare_p99, pgq_p99, "ms", higher_is_better=False)
    row("enqueue rate", ours_http.rate, bare_inserts, pgq_inserts, "req/s", higher_is_better=True)
    print(
        "\nenqueue rate: warmpool over HTTP (auth, validation, user cap, depth limit, idempotency key);"
        " the baselines insert straight through asyncpg."
        "\nratios > 1.00x mean warmpool is better (faster, or lower latency)."
    )
    print(
        f"\nsingle enqueues into a queue already that deep, {arguments.clients} clients"
        f" ({arguments.enqueues} each)\n{'depth':>10} {'warmpool':>10} {'pgqueuer':>10}  {'unit':<7} {'vs pgqueuer':>12}"
    )
    for depth, our_rate, their_rate in by_depth:
        print(
            f"{depth:>10} {our_rate:>10.1f} {their_rate:>10.1f}  {'req/s':<7}"
            f" {our_rate / their_rate:>11.2f}x"
        )
    flat = min(rate for _, rate, _ in by_depth) / max(rate for _, rate, _ in by_depth)
    print(
        f"goals: throughput >= pgqueuer: {'met' if ours_drain >= pgq_drain else 'NOT met'};"
        f" pickup p50 <= pgqueuer: {'met' if ours_p50 <= pgq_p50 else 'NOT met'};"
        f" single enqueues >= pgqueuer at every depth:"
        f" {'met' if all(ours >= theirs for _, ours, theirs in by_depth) else 'NOT met'}"
        f" (slowest depth at {flat:.2f}x the fastest)"
    )


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--cap", type=int, default=50)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--requests", type=int, default=2_000, help="enqueues per baseline")
    parser.add_argument("--enqueue-seconds", type=float, default=5, help="of POST /v1/jobs")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument(
        "--depths",
        type=lambda text: [int(depth) for depth in text.split(",")],
        default=[0, 10_000, 100_000],
        help="queue depths for the single-enqueue rates",
    )
    parser.add_argument("--enqueues", type=int, default=4_000, help="single enqueues per depth")
    asyncio.run(main(parser.parse_args()))
