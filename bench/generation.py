"""Generation benchmark: missions per minute through the whole pipeline with the offline
provider at zero delay, and the share of the generations' time spent in proofs.

    python bench/generation.py [--jobs 48] [--cap 2] [--database-url postgresql://...]

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
import tempfile
import time
from collections import Counter, defaultdict
from datetime import timedelta

from bench.scratch import database_parser, fresh_database
from core.domains import load
from generation.dispatcher import Dispatcher
from generation.offline import OfflineProvider
from generation.pipeline import MissionPipeline
from generation.sweeper import Sweeper
from generation.worker import Worker
from pool import waiting
from qa.proof import Prover
from server import migrate
from server.database import create_pool
from tests.support.jobs import LIMITS, enqueue
from tests.support.proving import ensure_toolchain

MINUTE = timedelta(minutes=1)


def proof_folder() -> Path:
    # Under /tmp with others allowed through: proofs run as the sandbox uids.
    folder = Path(tempfile.mkdtemp(prefix="warmpool-bench-"))
    folder.chmod(0o755)
    return folder


async def main(arguments: argparse.Namespace) -> None:
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


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--jobs", type=int, default=48)
    parser.add_argument("--cap", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
