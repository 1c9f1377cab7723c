"""Reading Jest's JSON report, as Jest 29 writes it."""

from pathlib import Path

import msgspec

from qa import jest_json
from qa.results import TestResult

ROOT = Path("/work/run-1")


def _report(*suites: dict[str, object], runtime_errors: int = 0) -> bytes:
    return msgspec.json.encode(
        {"numRuntimeErrorTestSuites": runtime_errors, "success": False, "testResults": suites}
    )


def test_each_assertion_becomes_a_verdict_named_by_file_and_titles() -> None:
    report = _report(
        {
            "name": "/work/run-1/cart.test.js",
            "status": "failed",
            "message": "",
            "assertionResults": [
                {"ancestorTitles": ["cart"], "title": "sums", "status": "passed"},
                {
                    "ancestorTitles": ["cart", "empty"],
                    "title": "is zero",
                    "status": "failed",
                    "failureMessages": [
                        "Error: expect(received).toBe(expected) // Object.is equality\n\n"
                        "Expected: 1\nReceived: 0\n    at Object.<anonymous> (cart.test.js:5:43)"
                    ],
                },
                {"ancestorTitles": [], "title": "later", "status": "pending"},
                {"ancestorTitles": [], "title": "someday", "status": "todo"},
            ],
        }
    )

    assert jest_json.parse(report, ROOT).tests == [
        TestResult(id="cart.test.js > cart > sums", outcome="passed"),
        TestResult(
            id="cart.test.js > cart > empty > is zero",
            outcome="failed",
            message="Error: expect(received).toBe(expected) // Object.is equality "
            "Expected: 1 Received: 0",
        ),
        TestResult(id="cart.test.js > later", outcome="skipped"),
        TestResult(id="cart.test.js > someday", outcome="skipped"),
    ]


def test_a_test_file_jest_could_not_run_makes_the_run_inconclusive() -> None:
    report = _report(
        {
            "name": "/work/run-1/cart.test.js",
            "status": "failed",
            "message": "  ● Test suite failed to run\n\n    Cannot find module './nothere' "
            "from 'cart.test.js'\n\n    > 1 | require('./nothere');",
            "assertionResults": [],
        },
        runtime_errors=1,
    )

    assert jest_json.parse(report, ROOT).problem == (
        "Jest could not run cart.test.js: Cannot find module './nothere' from 'cart.test.js'"
    )


def test_a_report_that_is_not_json_is_a_problem() -> None:
    assert (jest_json.parse(b"PASS", ROOT).problem or "").startswith(
        "the Jest report is not what Jest writes"
    )


def test_a_report_without_suites_reports_no_test() -> None:
    assert jest_json.parse(_report(), ROOT).tests == []
