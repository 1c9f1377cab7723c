"""What every language's proof promises, with the real runner (pytest, Jest, pgTAP): a correct
mission proves, a bug that breaks nothing and a gold that fails its own tests are refused,
and a run that proves nothing (an empty test file, one that exits 0 at import, a runner that
reports nothing) is never accepted."""

from __future__ import annotations

import pytest

from qa.policy import judge_gold, judge_sabotage
from qa.proof import Prover
from qa.results import Trust
from tests.support.proof_samples import JAVASCRIPT, PYTHON, SAMPLES, SQL, Sample
from tests.support.proving import require

CONFINEMENT = {
    ("python", "untrusted"): "bubblewrap",
    ("python", "trusted"): "limits",
    ("javascript", "untrusted"): "bubblewrap",
    ("javascript", "trusted"): "limits",
    ("sql", "untrusted"): "database role",
    ("sql", "trusted"): "database role",
}


def by_language(sample: Sample) -> str:
    return sample.language


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
@pytest.mark.parametrize("sample", SAMPLES, ids=by_language)
async def test_a_correct_mission_proves(prover: Prover, sample: Sample, trust: Trust) -> None:
    require(prover, sample.language, trust)
    gold = await prover.run(sample.language, sample.gold, sample.tests, trust=trust)
    sabotaged = await prover.run(sample.language, sample.sabotaged, sample.tests, trust=trust)

    count = len(sample.test_ids)
    assert judge_gold(gold).reason == f"gold passed all {count} tests", gold.log_excerpt
    assert judge_gold(gold).accepted
    assert judge_sabotage(sabotaged, "all").reason == f"the planted bug broke all {count} tests"
    assert [test.id for test in gold.tests] == sample.test_ids
    assert sabotaged.tests[0].message == sample.first_failure
    assert gold.confinement == CONFINEMENT[sample.language, trust]


@pytest.mark.parametrize("sample", SAMPLES, ids=by_language)
async def test_a_bug_that_breaks_nothing_is_refused(prover: Prover, sample: Sample) -> None:
    require(prover, sample.language, "untrusted")
    run = await prover.run(sample.language, sample.harmless, sample.tests, trust="untrusted")

    verdict = judge_sabotage(run, "all")
    assert not verdict.accepted
    assert verdict.reason == (
        f"the planted bug broke nothing: 0 of {len(sample.test_ids)} tests failed"
    )


@pytest.mark.parametrize("sample", SAMPLES, ids=by_language)
async def test_a_gold_that_fails_its_own_tests_is_refused(prover: Prover, sample: Sample) -> None:
    require(prover, sample.language, "untrusted")
    run = await prover.run(sample.language, sample.gold, sample.wrong_tests, trust="untrusted")

    verdict = judge_gold(run)
    assert not verdict.accepted
    assert verdict.reason == sample.wrong_test_refusal


@pytest.mark.parametrize(
    ("sample", "check"),
    [
        (
            PYTHON,
            {
                "test_project.py": "from pathlib import Path\n\n"
                "def test_requirements_name_pytest():\n"
                "    assert Path('requirements.txt').read_text() == 'pytest==8.4.2\\n'\n"
            },
        ),
        (
            JAVASCRIPT,
            {
                "project.test.js": "const pkg = require('./package.json');\n"
                "test('jest is a dev dependency', () => {\n"
                "  expect(pkg.devDependencies.jest).toBe('29.7.0');\n"
                "});\n"
            },
        ),
    ],
    ids=["python", "javascript"],
)
async def test_the_candidate_project_names_its_test_runner(
    prover: Prover, sample: Sample, check: dict[str, str]
) -> None:
    require(prover, sample.language, "untrusted")
    run = await prover.run(sample.language, sample.gold, check, trust="untrusted")

    assert run.passed == 1, run.log_excerpt


def case(
    sample: Sample, test_file: str, reason: str, solution_extra: dict[str, str] | None = None
) -> tuple[Sample, dict[str, str], dict[str, str], str]:
    """The sample's gold (plus `solution_extra`) against `test_file` as its only test file."""
    [name] = sample.tests
    return (sample, {**sample.gold, **(solution_extra or {})}, {name: test_file}, reason)


@pytest.mark.parametrize(
    ("sample", "solution", "test_files", "reason"),
    [
        pytest.param(
            *case(PYTHON, "", "pytest exited with status 5 (no tests collected)"),
            id="python-empty",
        ),
        pytest.param(
            *case(PYTHON, "import os\nos._exit(0)\n", "the runner wrote no report"),
            id="python-exits-0-at-import",
        ),
        pytest.param(
            *case(PYTHON, "import sys\nsys.exit(0)\n", "pytest stopped with an internal error"),
            id="python-sys-exit-at-import",
        ),
        pytest.param(
            *case(
                PYTHON,
                PYTHON.tests["test_pricing.py"],
                "the runner wrote no report",
                {"pytest.ini": "[pytest]\naddopts = -p no:junitxml\n"},
            ),
            id="python-runner-reports-nothing",
        ),
        pytest.param(
            *case(
                PYTHON,
                "from pricing import missing\n\ndef test_x():\n    pass\n",
                "pytest could not collect test_pricing.py: ImportError",
            ),
            id="python-import-error",
        ),
        pytest.param(
            *case(JAVASCRIPT, "", "Jest could not run cart.test.js: Your test suite must"),
            id="javascript-empty",
        ),
        pytest.param(
            *case(
                JAVASCRIPT,
                "describe('total', () => {});\n",
                "Jest could not run cart.test.js: Your test suite must",
            ),
            id="javascript-no-test-yet-success",
        ),
        pytest.param(
            *case(JAVASCRIPT, "process.exit(0);\n", "the runner wrote no report"),
            id="javascript-exits-0-at-import",
        ),
        pytest.param(
            *case(
                JAVASCRIPT,
                "const { missing } = require('./nowhere');\ntest('x', () => {});\n",
                "Jest could not run cart.test.js: Cannot find module './nowhere'",
            ),
            id="javascript-import-error",
        ),
        pytest.param(
            *case(SQL, "", "no test ran: the test files define no function"), id="sql-empty"
        ),
        pytest.param(
            *case(SQL, "SELECT 1;\n", "no test ran: the test files define no function"),
            id="sql-runs-and-defines-nothing",
        ),
        pytest.param(
            *case(
                SQL,
                "CREATE FUNCTION test_x( RETURNS SETOF TEXT;\n",
                "the test file test_totals.sql failed: syntax error",
            ),
            id="sql-test-file-syntax-error",
        ),
    ],
)
async def test_a_run_that_proves_nothing_is_refused(
    prover: Prover,
    sample: Sample,
    solution: dict[str, str],
    test_files: dict[str, str],
    reason: str,
) -> None:
    require(prover, sample.language, "untrusted")
    run = await prover.run(sample.language, solution, test_files, trust="untrusted")

    assert not run.conclusive
    assert (run.reason or "").startswith(reason)
    assert judge_gold(run).reason == f"inconclusive: {run.reason}"
    assert not judge_sabotage(run, "at_least_one").accepted
