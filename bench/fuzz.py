"""Fuzz benchmark: the long form of the fuzz tier (tests/fuzz), every phase and check of
`schemathesis run --checks all` with many more generated cases per operation, phase and role
than the test command runs, then the cases run per role and operation, the statuses that
answered them, and the total.

    python bench/fuzz.py [--examples 100] [--seed N]

Every case is a request to a real `warmpool serve` process on a database seeded with missions,
jobs and instances, with each role's key in turn. Without --seed, a new one each run, printed
first so that a failing run can be repeated. Needs a Postgres (as scripts/test finds one).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import os
import random
import subprocess


def main() -> int:
    parser = argparse.ArgumentParser(description="The fuzz tier's long form.")
    parser.add_argument(
        "--examples", type=int, default=100, help="generated cases per operation, phase and role"
    )
    parser.add_argument("--seed", type=int, default=random.randrange(2**32))
    arguments = parser.parse_args()
    print(
        f"fuzzing with {arguments.examples} cases per operation, phase and role, "
        f"seed {arguments.seed}"
    )
    environment = os.environ | {
        "WARMPOOL_FUZZ_EXAMPLES": str(arguments.examples),
        "WARMPOOL_FUZZ_SEED": str(arguments.seed),
    }
    # A long run outlasts the test command's per-test time limit.
    command = [sys.executable, "-m", "pytest", "tests/fuzz", "-q", "-o", "timeout=0"]
    return subprocess.call(command, cwd=ROOT, env=environment)


if __name__ == "__main__":
    sys.exit(main())
