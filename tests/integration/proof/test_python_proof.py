"""Python proofs really run pytest: a correct mission proves, and every way a proof can be
empty or broken is refused."""

from __future__ import annotations

import pytest

from qa.policy import judge_gold, judge_sabotage
from qa.proof import Prover
from qa.results import Trust
from tests.support.proving import require

GOLD = {
    "pricing.py": (
        "def discounted(price, percent):\n"
        "    if not 0 <= percent <= 100:\n"
        "        raise ValueError('percent must be between 0 and 100')\n"
        "    return round(price * (100 - percent) / 100, 2)\n"
    )
}
TESTS = {
    "test_pricing.py": (
        "import pytest\n"
        "from pricing import discounted\n\n"
        "def test_ten_percent():\n"
        "    assert discounted(50, 10) == 45\n\n"
        "def test_three_quarters():\n"
        "    assert discounted(80, 75) == 20\n\n"
        "def test_rounds_to_cents():\n"
        "    assert discounted(9.99, 33) == 6.69\n"
    )
}
# Adds the discount instead of taking it off: every test fails.
SABOTAGED = {"pricing.py": GOLD["pricing.py"].replace("100 - percent", "100 + percent")}
# The same arithmetic written differently: no test can notice.
HARMLESS = {
    "pricing.py": GOLD["pricing.py"].replace(
        "round(price * (100 - percent) / 100, 2)", "round(price - price * percent / 100, 2)"
    )
}
# Caps discounts at half price: only the three-quarters test notices.
CAPPED = {
    "pricing.py": GOLD["pricing.py"].replace(
        "    return", "    percent = min(percent, 50)\n    return"
    )
}


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
async def test_a_correct_mission_proves(prover: Prover, trust: Trust) -> None:
    require(prover, "python", trust)
    gold = await prover.run("python", GOLD, TESTS, trust=trust)
    sabotaged = await prover.run("python", SABOTAGED, TESTS, trust=trust)

    assert judge_gold(gold).reason == "gold passed all 3 tests"
    assert judge_gold(gold).accepted
    assert judge_sabotage(sabotaged, "all").reason == "the planted bug broke all 3 tests"
    assert [test.id for test in gold.tests] == [
        "test_pricing.py::test_ten_percent",
        "test_pricing.py::test_three_quarters",
        "test_pricing.py::test_rounds_to_cents",
    ]
    assert gold.confinement == ("bubblewrap" if trust == "untrusted" else "limits")
    assert "--junitxml=.proof/junit.xml" in gold.command
    assert sabotaged.failed == 3
    assert sabotaged.tests[0].message == "assert 55.0 == 45 + where 55.0 = discounted(50, 10)"


async def test_a_bug_that_breaks_nothing_is_refused(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    run = await prover.run("python", HARMLESS, TESTS, trust="untrusted")

    verdict = judge_sabotage(run, "all")
    assert not verdict.accepted
    assert verdict.reason == "the planted bug broke nothing: 0 of 3 tests failed"


async def test_a_bug_that_breaks_some_tests_passes_only_the_relaxed_policy(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    run = await prover.run("python", CAPPED, TESTS, trust="untrusted")

    assert (run.passed, run.failed) == (2, 1)
    assert judge_sabotage(run, "at_least_one").accepted
    strict = judge_sabotage(run, "all")
    assert not strict.accepted
    assert strict.reason.startswith(
        "the planted bug broke only 1 of 3 tests (every test must fail)"
    )
    assert "test_pricing.py::test_ten_percent" in strict.reason


async def test_a_gold_that_fails_its_own_tests_is_refused(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    wrong = {"test_pricing.py": TESTS["test_pricing.py"].replace("== 20", "== 21")}
    run = await prover.run("python", GOLD, wrong, trust="untrusted")

    verdict = judge_gold(run)
    assert not verdict.accepted
    assert verdict.reason == (
        "gold failed 1 of 3 tests: test_pricing.py::test_three_quarters "
        "(assert 20.0 == 21 + where 20.0 = discounted(80, 75))"
    )


@pytest.mark.parametrize(
    ("test_file", "solution_extra", "reason"),
    [
        pytest.param("", {}, "pytest exited with status 5 (no tests collected)", id="empty"),
        pytest.param(
            "import os\nos._exit(0)\n", {}, "the runner wrote no report", id="exits-0-at-import"
        ),
        pytest.param(
            "import sys\nsys.exit(0)\n", {}, "pytest stopped with an internal error", id="sys-exit"
        ),
        pytest.param(
            TESTS["test_pricing.py"],
            {"pytest.ini": "[pytest]\naddopts = -p no:junitxml\n"},
            "the runner wrote no report",
            id="runner-reports-nothing",
        ),
        pytest.param(
            "from pricing import missing\n\ndef test_x():\n    pass\n",
            {},
            "pytest could not collect test_pricing.py: ImportError",
            id="import-error",
        ),
    ],
)
async def test_a_run_that_proves_nothing_is_refused(
    prover: Prover, test_file: str, solution_extra: dict[str, str], reason: str
) -> None:
    require(prover, "python", "untrusted")
    run = await prover.run(
        "python", {**GOLD, **solution_extra}, {"test_pricing.py": test_file}, trust="untrusted"
    )

    assert not run.conclusive
    assert run.reason is not None
    assert run.reason.startswith(reason)
    assert not judge_gold(run).accepted
    assert not judge_sabotage(run, "at_least_one").accepted
    assert judge_gold(run).reason == f"inconclusive: {run.reason}"


async def test_a_sabotage_that_does_not_compile_proves_nothing(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    broken = {"pricing.py": GOLD["pricing.py"].replace("def discounted", "def discounted(")}
    run = await prover.run("python", broken, TESTS, trust="untrusted")

    assert not run.conclusive
    assert "could not collect" in (run.reason or "")
    assert judge_sabotage(run, "all").reason.startswith("inconclusive: ")


async def test_the_candidate_project_is_complete(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    checks = {
        "test_project.py": (
            "from pathlib import Path\n\n"
            "def test_requirements_name_pytest():\n"
            "    assert Path('requirements.txt').read_text().startswith('pytest==')\n"
        )
    }
    run = await prover.run("python", GOLD, checks, trust="untrusted")

    assert run.passed == 1, run.log_excerpt


async def test_mission_paths_that_could_escape_are_refused(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    run = await prover.run("python", {"../escape.py": "x = 1\n"}, TESTS, trust="untrusted")

    assert not run.conclusive
    assert "'../escape.py' is not accepted" in (run.reason or "")
