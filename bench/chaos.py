"""Chaos benchmark: the long form of the chaos suite (tests/chaos), thousands of jobs through
two API processes and four workers of the real command line on a private PostgreSQL, while
workers are killed with SIGKILL at random moments, every process is restarted in turn with
SIGTERM, and PostgreSQL is restarted.

    python bench/chaos.py [--jobs 3000] [--seconds 300] [--kills 10] [--python-share 0.05] [--seed N]

Prints the figures (jobs and their final statuses, kills, restarts, in-flight samples and the
highest, reclaim times) and every breach of the queue's promises; exits 1 if there was one.
Without --seed, a new one each run, printed first so that a failing run can be repeated. The
processes' logs stay in a folder named at the end.
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
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument(
        "--seconds", type=float, default=300, help="jobs are offered over this time"
    )
    parser.add_argument("--kills", type=int, default=10, help="workers killed with SIGKILL")
    parser.add_argument(
        "--python-share", type=float, default=0.05, help="the share of python jobs (real proofs)"
    )
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    arguments = parser.parse_args()
    print(f"chaos with seed {arguments.seed}", flush=True)
    ensure_toolchain()
    scenario = Scenario(
        jobs=arguments.jobs,
        seconds=arguments.seconds,
        kills=arguments.kills,
        python_share=arguments.python_share,
        seed=arguments.seed,
    )
    log_dir = Path(tempfile.mkdtemp(prefix="warmpool-chaos-"))
    report = asyncio.run(run(scenario, log_dir))
    print(report.summary())
    print(f"process logs in {log_dir}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
