"""A run's canaries: beside which test files, told apart by their token, and what a report that
left one out or passed one says."""

from __future__ import annotations

import pytest

from qa.canaries import NOT_TRUSTED, Canaries
from qa.results import Outcome, TestResult


def test_each_test_file_gets_a_canary_beside_it_and_helpers_none() -> None:
    python = Canaries("python", token="zz0")
    files = {"tests/test_cart.py": "", "tests/conftest.py": "", "cart_data.json": "{}"}
    assert sorted(python.beside(files)) == sorted([*files, "tests/test_zz0_test_cart.py"])

    javascript = Canaries("javascript", token="zz0")
    assert sorted(javascript.beside({"cart.test.js": ""})) == [
        "cart.test.js",
        "cart.test.zz0.test.js",
    ]

    sql = Canaries("sql", token="zz0")
    assert sorted(sql.beside({"test_a.sql": "", "test_b.sql": ""})) == [
        "test_a.sql",
        "test_b.sql",
        "test_zz0.sql",
    ]


def test_every_grading_has_a_token_of_its_own() -> None:
    assert Canaries("python").token != Canaries("python").token


def results(*outcomes: tuple[str, Outcome]) -> list[TestResult]:
    return [TestResult(id=test_id, outcome=outcome) for test_id, outcome in outcomes]


@pytest.mark.parametrize(
    ("reported", "problem"),
    [
        (results(("t.py::a", "failed"), ("t.py::zz0::a", "failed")), None),
        (results(("t.py::a", "passed"), ("t.py::zz0::a", "errored")), None),
        # A canary passed: the runner reported what the code made it report.
        (results(("t.py::a", "passed"), ("t.py::zz0::a", "passed")), NOT_TRUSTED),
        (results(("t.py::a", "passed"), ("t.py::zz0::a", "skipped")), NOT_TRUSTED),
        # A report written without the canaries, or with fewer than the tests it names.
        (results(("t.py::a", "passed")), NOT_TRUSTED),
        (
            results(("t.py::a", "passed"), ("t.py::b", "passed"), ("t.py::zz0::a", "failed")),
            NOT_TRUSTED,
        ),
    ],
)
def test_a_report_is_trusted_only_with_every_canary_failed(
    reported: list[TestResult], problem: str | None
) -> None:
    canaries = Canaries("python", token="zz0")
    assert canaries.problem(reported) == problem
    mission, _ = canaries.apart(reported)
    assert all("zz0" not in test.id for test in mission)


def test_sql_has_one_canary_that_runs_every_test() -> None:
    canaries = Canaries("sql", token="zz0")
    one = results(("public.test_a", "passed"), ("public.test_b", "passed"))
    assert canaries.problem([*one, *results(("public.test_zz0", "failed"))]) is None
    assert canaries.problem([*one, *results(("public.test_zz0", "passed"))]) == NOT_TRUSTED
    assert canaries.problem(one) == NOT_TRUSTED
