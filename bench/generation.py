"""Generation benchmark: missions per minute through the whole pipeline with the offline
provider at zero delay, and the share of the generations' time spent in proofs; the renderings
proven per minute per proof slot and the sandbox seconds per served instance (bench/renderings.py,
which runs alone too); then what the model costs through the openai provider against the
loopback stub (the real SDK).

    python bench/generation.py [--jobs 48] [--cap 2] [--per-mission 10] [--database-url ...]
    python bench/generation.py --costs-only [--cost-jobs 50] [--deploy-jobs 10]

Costs: the same run of jobs (four replenish ones to one interactive, copy missions, every one
distinct) with WARMPOOL_BATCH off and then on, each in a database of its own: the ledger's cost
per instance the missions made can serve (each to its serve limit), and the ratio. Then a
scripted deploy: jobs whose mission calls are under way when their worker stops (the release at
a SIGTERM whose grace is over), finished by the next worker, with WARMPOOL_OPENAI_CALLS direct
and then background: the calls paid per completed job's purpose and try (goal 1.0).

Every job is a real one: claimed from the queue, written from the catalog, its gold proven,
a bug planted and proven (again when refused), the mission stored with its proof, the job
completed. Jobs go round the shipped domain map's domains (python, javascript, sql, copy),
proofs run trusted (the offline catalog ships with warmpool) in `--cap` slots. Needs the
toolchain (scripts/toolchain) and, for sql, a Postgres with pgTAP.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import itertools
import os
import time
from collections import Counter, defaultdict
from datetime import timedelta

import asyncpg

from bench import renderings
from bench.scratch import database_parser, fresh_database, proof_folder
from core.domains import load
from generation.dispatcher import Dispatcher
from generation.offline import OfflineProvider
from generation.openai.provider import Batching, Calls
from generation.pipeline import MissionPipeline
from generation.sweeper import Sweeper
from generation.worker import Worker
from pool import waiting
from qa.proof import Prover
from server import migrate
from server.database import create_pool
from tests.support.batches import MODEL, BatchRig, stub_provider
from tests.support.jobs import LIMITS, enqueue
from tests.support.openai_stub import COPY_ANSWERS, Behaviour, OpenAIStub, running_stub
from tests.support.proving import ensure_toolchain

MINUTE = timedelta(minutes=1)


async def main(arguments: argparse.Namespace) -> None:
    if not arguments.costs_only:
        await throughput(arguments)
        await renderings.main(arguments)
    with running_stub() as stub:
        stub.answers.update(COPY_ANSWERS)
        stub.distinct = True
        await costs(arguments, stub)


async def throughput(arguments: argparse.Namespace) -> None:
    url = await fresh_database(arguments.database_url, "bench_generation")
    pool = await create_pool(url)
    async with pool.acquire() as connection:
        await migrate.apply(connection)
    domain_map = load(ROOT / "domain_map.yaml")
    prover = await Prover.start(
        work_root=proof_folder(),
        toolchain_root=await asyncio.to_thread(ensure_toolchain),
        postgres_admin_url=arguments.database_url,
        slots=arguments.cap,
    )
    pipeline = MissionPipeline(
        db=pool,
        provider=OfflineProvider(delay_seconds=0),
        prover=prover,
        trust="trusted",
        domain_map=domain_map,
        sabotage_tries=3,
        serve_waiting_user=waiting.serve_waiting_user,
    )
    done = asyncio.Event()
    dispatcher: Dispatcher | None = None

    def slot_freed() -> None:
        assert dispatcher is not None
        dispatcher.wake()
        if not worker.running():
            done.set()

    worker = Worker(pool, pipeline, name="bench", capacity=arguments.cap, on_slot_freed=slot_freed)
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    dispatcher = Dispatcher(
        pool, worker, sweeper, global_cap=arguments.cap, replenish_cap=arguments.cap
    )

    domains = itertools.cycle(sorted(domain_map.domains))
    limits = LIMITS.__class__(user_cap=1, max_pending=10_000, replenish_max_pending=10_000)
    for _ in range(arguments.jobs):
        await enqueue(pool, None, domain=next(domains), limits=limits)
    start = time.perf_counter()
    dispatcher.wake()
    while await pool.fetchval(
        "SELECT count(*) FROM generation_jobs WHERE status IN ('pending', 'generating')"
    ):
        done.clear()
        await asyncio.wait_for(done.wait(), timeout=600)
    wall = time.perf_counter() - start

    rows = await pool.fetch(
        """SELECT j.domain, j.status, j.error, m.proof,
                  extract(epoch FROM j.finished_at - j.started_at) AS seconds
           FROM generation_jobs j LEFT JOIN missions m ON m.id = j.mission_id"""
    )
    made = sum(1 for row in rows if row["status"] == "completed")
    job_seconds: dict[str, float] = defaultdict(float)
    proof_seconds: dict[str, float] = defaultdict(float)
    for row in rows:
        job_seconds[row["domain"]] += float(row["seconds"] or 0)
        proof = row["proof"] or {}
        runs = ([proof["gold"]] if proof.get("gold") else []) + proof.get("sabotage_tries", [])
        proof_seconds[row["domain"]] += sum(run["duration_s"] for run in runs)
    await prover.close()
    await pool.close()

    print(
        f"\n{arguments.jobs} jobs, {made} missions made, {arguments.cap} at a time, {os.cpu_count()} cores"
    )
    print(f"wall time {wall:.1f} s: {made / wall * 60:.1f} missions per minute")
    print(f"{'domain':<22} {'job time s':>10} {'in proofs s':>12} {'share':>7}")
    for domain in sorted(job_seconds):
        share = proof_seconds[domain] / job_seconds[domain] if job_seconds[domain] else 0
        print(
            f"{domain:<22} {job_seconds[domain]:>10.1f} {proof_seconds[domain]:>12.1f} {share:>7.0%}"
        )
    total_job, total_proof = sum(job_seconds.values()), sum(proof_seconds.values())
    print(f"{'all':<22} {total_job:>10.1f} {total_proof:>12.1f} {total_proof / total_job:>7.0%}")
    print("(share: the time generations spent in proofs, of their whole time claimed to completed)")
    for error, count in Counter(row["error"] for row in rows if row["status"] == "failed").items():
        print(f"failed x{count}: {error}")


async def scratch_pool(arguments: argparse.Namespace, name: str) -> asyncpg.Pool:
    pool = await create_pool(await fresh_database(arguments.database_url, name))
    async with pool.acquire() as connection:
        await migrate.apply(connection)
    return pool


async def enqueue_mix(pool: asyncpg.Pool, jobs: int) -> None:
    """Four replenish jobs to one user's, copy missions."""
    limits = LIMITS.__class__(user_cap=1, max_pending=10_000, replenish_max_pending=10_000)
    for index in range(jobs):
        user = f"bench-user-{index}" if index % 5 == 4 else None
        await enqueue(pool, user, domain="marketing-copy", limits=limits)


async def cost_per_serve(
    arguments: argparse.Namespace, stub: OpenAIStub, batch: Batching
) -> tuple[float, int, int, dict[str, int]]:
    """(USD per instance the missions made can serve, missions, serves, ledger calls per mode)."""
    pool = await scratch_pool(arguments, f"bench_costs_{batch}")
    model = stub_provider(stub, batch=batch)
    try:
        await enqueue_mix(pool, arguments.cost_jobs)
        await BatchRig(pool, model, batch_size=arguments.cost_jobs).until_drained(turns=50)
        spent = await pool.fetchval("SELECT sum(cost_usd) FROM llm_calls")
        made = await pool.fetchrow("SELECT count(*), sum(max_serves) FROM missions")
        assert made is not None, "an aggregate returns one row"
        missions, serves = made
        modes = {
            row["mode"]: row["count"]
            for row in await pool.fetch("SELECT mode, count(*) FROM llm_calls GROUP BY mode")
        }
    finally:
        await model.close()
        await pool.close()
    return float(spent) / serves, missions, serves, modes


async def paid_per_call_under_deploy(
    arguments: argparse.Namespace, stub: OpenAIStub, calls: Calls
) -> tuple[float, int]:
    """(calls paid per completed job's purpose and try, jobs completed) when every job's mission
    call is under way at a deploy."""
    pool = await scratch_pool(arguments, f"bench_deploy_{calls}")
    model = stub_provider(stub, calls=calls, batch="off")
    stub.response_seconds = stub.delay_seconds = 1.0
    slow: Behaviour = "slow"  # chat completions: answered after the delay
    stub.plan(*itertools.repeat(slow, arguments.deploy_jobs))
    try:
        for _ in range(arguments.deploy_jobs):
            await enqueue(pool, None, domain="marketing-copy")
        stopping = BatchRig(pool, model)
        await stopping.dispatcher.run_once()
        while await pool.fetchval("SELECT count(*) FROM llm_calls") < arguments.deploy_jobs:
            await asyncio.sleep(0.05)
        # The deploy: the grace is over, the generations under way go back to the queue.
        await stopping.dispatcher.stop()
        await stopping.worker.release()
        stub.response_seconds = stub.delay_seconds = 0.0
        await BatchRig(pool, model).until_drained()
        row = await pool.fetchrow(
            """
            SELECT count(*) FILTER (WHERE c.cost_usd > 0) AS paid,
                   count(DISTINCT (c.job_id, c.purpose, c.try_number)) AS answered,
                   count(DISTINCT c.job_id) AS jobs
            FROM llm_calls c JOIN generation_jobs j ON j.id = c.job_id
            WHERE j.status = 'completed'
            """
        )
    finally:
        await model.close()
        await pool.close()
    assert row is not None, "an aggregate returns one row"
    return row["paid"] / row["answered"], row["jobs"]


async def costs(arguments: argparse.Namespace, stub: OpenAIStub) -> None:
    off = await cost_per_serve(arguments, stub, "off")
    on = await cost_per_serve(arguments, stub, "replenish")
    print(f"\nmodel cost, {arguments.cost_jobs} jobs (4 replenish to 1 interactive), {MODEL}")
    for name, (per_serve, missions, serves, modes) in (("batch off", off), ("batch on", on)):
        print(
            f"{name:<10} ${per_serve * 1000:.4f} per 1,000 served instances "
            f"({missions} missions, {serves} serves; calls by mode {modes})"
        )
    print(f"batching on / off: {on[0] / off[0]:.2f}x the cost per served instance")
    print(f"\nscripted deploy, {arguments.deploy_jobs} jobs with their mission calls under way")
    for calls in ("direct", "background"):
        per_call, jobs = await paid_per_call_under_deploy(arguments, stub, calls)
        print(f"{calls:<10} {per_call:.2f} paid calls per purpose and try ({jobs} jobs completed)")


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=48)
    parser.add_argument("--cap", type=int, default=2, help="proof slots")
    renderings.add_arguments(parser)
    parser.add_argument("--costs-only", action="store_true")
    parser.add_argument("--cost-jobs", type=int, default=50)
    parser.add_argument("--deploy-jobs", type=int, default=10)
    asyncio.run(main(parser.parse_args()))
