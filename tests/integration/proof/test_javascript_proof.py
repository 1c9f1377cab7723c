"""Javascript proofs really run Jest: a correct mission proves, and every way a proof can be
empty or broken is refused."""

from __future__ import annotations

import pytest

from qa.policy import judge_gold, judge_sabotage
from qa.proof import Prover
from qa.results import Trust
from tests.support.proving import require

GOLD = {
    "cart.js": (
        "function total(items) {\n"
        "  return items.reduce((sum, item) => sum + item.price * item.quantity, 0);\n"
        "}\n"
        "module.exports = { total };\n"
    )
}
TESTS = {
    "cart.test.js": (
        "const { total } = require('./cart');\n\n"
        "describe('total', () => {\n"
        "  test('multiplies price by quantity', () => {\n"
        "    expect(total([{ price: 2, quantity: 3 }])).toBe(6);\n"
        "  });\n"
        "  test('adds every line', () => {\n"
        "    expect(total([{ price: 2, quantity: 2 }, { price: 5, quantity: 1 }])).toBe(9);\n"
        "  });\n"
        "});\n"
    )
}
SABOTAGED = {
    "cart.js": GOLD["cart.js"].replace("item.price * item.quantity", "item.price + item.quantity")
}
HARMLESS = {
    "cart.js": GOLD["cart.js"].replace("item.price * item.quantity", "item.quantity * item.price")
}


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
async def test_a_correct_mission_proves(prover: Prover, trust: Trust) -> None:
    require(prover, "javascript", trust)
    gold = await prover.run("javascript", GOLD, TESTS, trust=trust)
    sabotaged = await prover.run("javascript", SABOTAGED, TESTS, trust=trust)

    assert judge_gold(gold).reason == "gold passed all 2 tests"
    assert judge_sabotage(sabotaged, "all").reason == "the planted bug broke all 2 tests"
    assert [test.id for test in gold.tests] == [
        "cart.test.js > total > multiplies price by quantity",
        "cart.test.js > total > adds every line",
    ]
    assert sabotaged.tests[0].message.endswith("Expected: 6 Received: 5")
    assert gold.command.startswith("jest --ci --runInBand --json --outputFile=.proof/jest.json")


async def test_a_bug_that_breaks_nothing_is_refused(prover: Prover) -> None:
    require(prover, "javascript", "untrusted")
    run = await prover.run("javascript", HARMLESS, TESTS, trust="untrusted")

    assert judge_sabotage(run, "all").reason == (
        "the planted bug broke nothing: 0 of 2 tests failed"
    )


async def test_a_gold_that_fails_its_own_tests_is_refused(prover: Prover) -> None:
    require(prover, "javascript", "untrusted")
    wrong = {"cart.test.js": TESTS["cart.test.js"].replace("toBe(9)", "toBe(10)")}
    run = await prover.run("javascript", GOLD, wrong, trust="untrusted")

    verdict = judge_gold(run)
    assert not verdict.accepted
    assert verdict.reason.startswith(
        "gold failed 1 of 2 tests: cart.test.js > total > adds every line"
    )


@pytest.mark.parametrize(
    ("test_file", "reason"),
    [
        pytest.param("", "Jest could not run cart.test.js: Your test suite must", id="empty"),
        pytest.param(
            "describe('total', () => {});\n",
            "Jest could not run cart.test.js: Your test suite must",
            id="no-test-but-success",
        ),
        pytest.param("process.exit(0);\n", "the runner wrote no report", id="exits-0-at-import"),
        pytest.param(
            "const { missing } = require('./nowhere');\ntest('x', () => {});\n",
            "Jest could not run cart.test.js: Cannot find module './nowhere'",
            id="import-error",
        ),
    ],
)
async def test_a_run_that_proves_nothing_is_refused(
    prover: Prover, test_file: str, reason: str
) -> None:
    require(prover, "javascript", "untrusted")
    run = await prover.run("javascript", GOLD, {"cart.test.js": test_file}, trust="untrusted")

    assert not run.conclusive
    assert (run.reason or "").startswith(reason)
    assert not judge_gold(run).accepted
    assert not judge_sabotage(run, "at_least_one").accepted


async def test_the_candidate_project_names_its_test_runner(prover: Prover) -> None:
    require(prover, "javascript", "untrusted")
    checks = {
        "project.test.js": (
            "const pkg = require('./package.json');\n"
            "test('jest is a dev dependency', () => {\n"
            "  expect(pkg.devDependencies.jest).toBe('29.7.0');\n"
            "});\n"
        )
    }
    run = await prover.run("javascript", GOLD, checks, trust="untrusted")

    assert run.passed == 1, run.log_excerpt
