"""Chaos benchmark: the long form of the chaos suite (tests/chaos), over 100 jobs a second through
two API processes and four workers of the real command line on a private PostgreSQL, their model
calls background responses through the real openai SDK to the loopback stub, while the
database's default isolation is REPEATABLE READ, warmpool's sessions are terminated twice a
second for 20 s, PostgreSQL is restarted, workers are killed with SIGKILL at random moments and
every process is restarted in turn with SIGTERM.

    python bench/chaos.py [--jobs 31500] [--seconds 300] [--kills 10] [--terminate-seconds 20]
                          [--python-share 0.002] [--seed N]

Prints the figures (jobs and their final statuses, kills, restarts, the load's pace around the
PostgreSQL restart, sessions terminated, how the system came back after the terminations and
the restart, in-flight samples and the highest, reclaim times) and every breach of the queue's
promises; exits 1 if there was one. Without --seed, a new one each run, printed first so that a
failing run can be repeated. The processes' logs stay in a folder named at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import random
import tempfile

from tests.chaos.engine import run
from tests.chaos.scenario import Scenario
from tests.support.proving import ensure_toolchain


def main() -> int:
    parser = argparse.ArgumentParser(description="The chaos suite's long form.")
    parser.add_argument("--jobs", type=int, default=31500)
    parser.add_argument(
        "--seconds", type=float, default=300, help="jobs are offered over this time"
    )
    parser.add_argument("--kills", type=int, default=10, help="workers killed with SIGKILL")
    parser.add_argument(
        "--terminate-seconds",
        type=float,
        default=20,
        help="warmpool's sessions are terminated twice a second for this long",
    )
    # Each python job runs two real proofs, a fraction of a second of CPU each: at this rate
    # a larger share would take the cores that the rest of the load needs.
    parser.add_argument(
        "--python-share", type=float, default=0.002, help="the share of python jobs (real proofs)"
    )
    parser.add_argument(
        "--model",
        choices=["offline", "stub"],
        default="offline",
        help="offline: the offline provider, at the rate the faults must be survived under; "
        "stub: background calls to the loopback OpenAI stub, each paid call checked against "
        "the calls it served (the stub, one Python process, serves some 30 jobs/s here: lower "
        "--jobs to match)",
    )
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    arguments = parser.parse_args()
    print(f"chaos with seed {arguments.seed}", flush=True)
    ensure_toolchain()
    scenario = Scenario(
        jobs=arguments.jobs,
        seconds=arguments.seconds,
        kills=arguments.kills,
        terminate_seconds=arguments.terminate_seconds,
        python_share=arguments.python_share,
        seed=arguments.seed,
        model=arguments.model,
        # A copy job takes two model calls; with these, the workers' slots outrun the offered
        # rate, so the queue catches up after each fault, and the cap still binds.
        model_delay=0.05,
        global_cap=32,
        worker_concurrency=10,
        max_pending=500,
        lanes=48,
        # At this rate a 2 s window holds some 200 completions: after each fault they must be
        # back to the whole offered rate, not a share of it.
        recovery_share=1.0,
    )
    log_dir = Path(tempfile.mkdtemp(prefix="warmpool-chaos-"))
    report = asyncio.run(run(scenario, log_dir))
    print(report.summary())
    print(f"process logs in {log_dir}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
