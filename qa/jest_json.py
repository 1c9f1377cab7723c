"""Reading Jest's JSON report (`jest --json --outputFile=...`).

A test file that Jest could not run (a syntax error, a missing module, no test in it) makes
the whole run inconclusive: Jest counts it as a failed suite with no failed test, which
would otherwise read as "nothing failed".
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from qa.results import Outcome, Reported, TestResult, short

_OUTCOMES: dict[str, Outcome] = {"passed": "passed", "failed": "failed"}  # else: skipped
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_FRAME = re.compile(r"^(at |>|\d+ \|)")


class _Assertion(msgspec.Struct, rename="camel"):
    title: str
    status: str
    ancestor_titles: list[str] = []
    failure_messages: list[str] = []


class _Suite(msgspec.Struct, rename="camel"):
    name: str
    message: str = ""
    assertion_results: list[_Assertion] = []


class _Report(msgspec.Struct, rename="camel"):
    num_runtime_error_test_suites: int = 0
    test_results: list[_Suite] = []


def parse(report: bytes, root: Path) -> Reported:
    try:
        decoded = msgspec.json.decode(report, type=_Report)
    except msgspec.DecodeError as error:
        return Reported([], f"the Jest report is not what Jest writes ({error})")
    tests: list[TestResult] = []
    for suite in decoded.test_results:
        file = _relative(suite.name, root)
        if not suite.assertion_results:
            return Reported([], f"Jest could not run {file}: {_first_lines(suite.message)}")
        tests += [
            TestResult(
                id=" > ".join([file, *assertion.ancestor_titles, assertion.title]),
                outcome=_OUTCOMES.get(assertion.status, "skipped"),
                message=_first_lines("\n".join(assertion.failure_messages), count=3),
            )
            for assertion in suite.assertion_results
        ]
    if decoded.num_runtime_error_test_suites:
        return Reported(tests, "Jest could not run every test file")
    return Reported(tests)


def _relative(name: str, root: Path) -> str:
    path = Path(name)
    return str(path.relative_to(root)) if path.is_relative_to(root) else name


def _first_lines(text: str, count: int = 1) -> str:
    """The message without Jest's heading, code frame and stack: `Expected: 1 Received: 0`."""
    kept: list[str] = []
    for raw in _COLOUR.sub("", text).splitlines():
        line = raw.strip().lstrip("●").strip()
        if _FRAME.match(line) or len(kept) == count:
            break
        if line and line != "Test suite failed to run":
            kept.append(line)
    return short(" ".join(kept))
