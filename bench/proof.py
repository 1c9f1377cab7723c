"""Proof benchmark: the median time of one proof per language, against the goals.

    python bench/proof.py [--runs 7] [--trust untrusted] [--admin-url postgresql://...]

Each proof is the full thing a generation waits for: a fresh workspace (or database), the
real runner (pytest, Jest, pgTAP) on a small correct mission, the report read back, and
everything removed. Goals, on a 2-core machine: python under 1.5 s, sql under 1 s,
javascript under 3 s. Needs the toolchain (scripts/toolchain) and, for sql, a Postgres with
pgTAP (default: the one on 127.0.0.1:5432).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from qa.proof import Prover
from qa.results import Trust
from tests.support.proving import TOOLCHAIN

GOALS_S = {"python": 1.5, "sql": 1.0, "javascript": 3.0}
MISSIONS = {
    "python": (
        {
            "pricing.py": "def discounted(price, percent):\n    return price * (100 - percent) / 100\n"
        },
        {
            "test_pricing.py": "from pricing import discounted\n\n"
            "def test_ten_percent():\n    assert discounted(50, 10) == 45\n\n"
            "def test_nothing_off():\n    assert discounted(50, 0) == 50\n"
        },
    ),
    "javascript": (
        {"cart.js": "module.exports = { total: (items) => items.reduce((s, i) => s + i, 0) };\n"},
        {
            "cart.test.js": "const { total } = require('./cart');\n"
            "test('adds', () => { expect(total([1, 2])).toBe(3); });\n"
            "test('empty', () => { expect(total([])).toBe(0); });\n"
        },
    ),
    "sql": (
        {"schema.sql": "CREATE TABLE item (price int);\nINSERT INTO item VALUES (10), (20);\n"},
        {
            "test_items.sql": "CREATE FUNCTION test_total() RETURNS SETOF TEXT LANGUAGE sql "
            "AS $$ SELECT tap.is((SELECT sum(price)::int FROM item), 30, 'total') $$;\n"
            "CREATE FUNCTION test_count() RETURNS SETOF TEXT LANGUAGE sql "
            "AS $$ SELECT tap.is((SELECT count(*)::int FROM item), 2, 'count') $$;\n"
        },
    ),
}


async def main(runs: int, trust: Trust, admin_url: str) -> int:
    with tempfile.TemporaryDirectory(prefix="warmpool-bench-proof-") as work:
        os.chmod(work, 0o755)  # the sandbox uids enter their run folders through it
        async with await Prover.start(
            work_root=Path(work),
            toolchain_root=TOOLCHAIN,
            postgres_admin_url=admin_url,
            slots=1,
        ) as prover:
            print(f"{runs} proofs per language, {trust} code, one at a time")
            missed = 0
            for language, (solution, tests) in MISSIONS.items():
                reason = prover.availability(language, trust)
                if reason is not None:
                    print(f"{language:<11} skipped: {reason}")
                    continue
                times = []
                for _ in range(runs):
                    started = time.perf_counter()
                    run = await prover.run(language, solution, tests, trust=trust)
                    times.append(time.perf_counter() - started)
                    if not (run.conclusive and run.passed == run.total):
                        raise RuntimeError(f"{language} proof did not pass: {run.reason}")
                median = statistics.median(times)
                goal = GOALS_S[language]
                met = "met" if median < goal else "MISSED"
                missed += median >= goal
                print(
                    f"{language:<11} median {median:5.2f} s  (min {min(times):.2f}, "
                    f"max {max(times):.2f})  goal < {goal:.1f} s: {met}"
                )
    return 1 if missed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--trust", choices=["trusted", "untrusted"], default="untrusted")
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    arguments = parser.parse_args()
    sys.exit(asyncio.run(main(arguments.runs, arguments.trust, arguments.admin_url)))
