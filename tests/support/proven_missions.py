"""Missions stored the way the generation pipeline stores them (`qa.missions.store`), with a
proof that looks like a real one: for review tests and the reviewer UI."""

from __future__ import annotations

import itertools

import msgspec

from core.domains import Domain, Review
from core.sql import Executor
from qa.missions import MissionProof, no_code_proof, store
from qa.results import Outcome, ProofRun, TestResult, proof_run

_numbers = itertools.count(1)

GOLD = {
    "pricing.py": (
        "def total(prices, discount):\n"
        '    """The sum of the prices, less a discount between 0 and 1."""\n'
        "    subtotal = sum(prices)\n"
        "    return round(subtotal * (1 - discount), 2)\n"
    ),
    "helpers.py": "def cents(amount):\n    return round(amount * 100)\n",
}
SABOTAGED = GOLD | {"pricing.py": GOLD["pricing.py"].replace("(1 - discount)", "(1 + discount)")}
TESTS = {
    "test_pricing.py": (
        "from pricing import total\n\n\n"
        "def test_no_discount():\n    assert total([1, 2], 0) == 3\n\n\n"
        "def test_half_off():\n    assert total([10], 0.5) == 5\n"
    )
}

# Other inputs than the visible tests': a fix that only makes their values come out fails.
HIDDEN = {
    "test_pricing_more.py": (
        "from pricing import total\n\n\n"
        "def test_a_quarter_off_three_items():\n    assert total([4, 6, 10], 0.25) == 15\n\n\n"
        "def test_a_tenth_off():\n    assert total([20], 0.1) == 18\n"
    )
}


def run(*outcomes: Outcome) -> ProofRun:
    tests = [
        TestResult(id=f"test_pricing.py::test_{index}", outcome=outcome)
        for index, outcome in enumerate(outcomes)
    ]
    return proof_run(
        language="python",
        trust="untrusted",
        confinement="bubblewrap",
        command="pytest -q test_pricing.py",
        duration_s=0.4321,
        log="".join("." if outcome == "passed" else "F" for outcome in outcomes) + "\n",
        tests=tests,
        problem=None,
    )


PROOF = MissionProof(
    gold=run("passed", "passed"),
    sabotage_tries=[run("passed", "failed")],
    verdict="proven: the gold passes 2 of 2 tests, the sabotage fails 1",
)


async def store_mission(
    connection: Executor,
    domain: Domain,
    *,
    title: str | None = None,
    requested_by: str | None = None,
    proven: bool = True,
) -> int:
    """Store a distinct mission (its files carry a number) and return its id."""
    number = next(_numbers)
    mark = f"# mission {number}\n"
    code = domain.language != "none"
    mission_id = await store(
        connection,
        domain=domain,
        title=title or f"Discounts that add up, part {number}",
        brief="The checkout total is wrong when a discount applies. Find and fix the bug.",
        gold_files={path: mark + text for path, text in GOLD.items()},
        test_files=TESTS if code else {},
        hidden_test_files=HIDDEN if code else {},
        sabotaged_files={path: mark + text for path, text in SABOTAGED.items()},
        bug_summary="total() adds the discount instead of subtracting it.",
        grader_hint="The fix is one sign in pricing.py.",
        proof=PROOF if code else no_code_proof(),
        provider="offline",
        prompt_version="v1",
        job_id=None,
        requested_by=requested_by,
        max_serves=domain.retire_after,
        proven=proven,
    )
    assert mission_id is not None
    return mission_id


def with_review(domain: Domain, review: Review) -> Domain:
    return msgspec.structs.replace(domain, review=review)
