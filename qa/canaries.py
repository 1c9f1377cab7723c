"""Canaries: tests a grading adds to each of its runs that must fail, whatever the code.

Candidate code runs inside the test runner's process, so it can make the runner report what it
likes: replace how a test runs, neuter the assertions, rewrite the report at exit. Whatever does
that for the mission's tests does it for the canaries too, and a canary that did not fail shows
the run's report cannot be trusted.

A canary is a copy of a test file whose every test runs as written (calling the candidate's code
as the original does) and then fails where the runner runs the test: pytest's by a wrapper that
raises after the test, Jest's by an `expect` after each test, pgTAP's by `fail()` after
running every test function. A forger that tells canaries apart from the mission's tests (by
their names or their text) still escapes them: see README, "Hostile by default".
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import PurePosixPath

from qa.results import TestResult

NOT_TRUSTED = "the tests' report cannot be trusted: the code changed how the tests run or report"

_PYTHON = """import functools as _functools
import importlib.util as _util
import inspect as _inspect
import pathlib as _pathlib
import sys as _sys

_spec = _util.spec_from_file_location({module!r}, _pathlib.Path(__file__).with_name({copied!r}))
_copy = _util.module_from_spec(_spec)
_sys.modules[{module!r}] = _copy
_spec.loader.exec_module(_copy)


def _{token}(test):
    @_functools.wraps(test)  # the same signature: the same fixtures and parameters
    def must_fail(*args, **kwargs):
        test(*args, **kwargs)
        raise AssertionError("this test must fail")

    return must_fail


for _name, _value in vars(_copy).items():
    if _name[:2] == "__":
        continue
    if _name.startswith("test") and _inspect.isfunction(_value):
        _value = _{token}(_value)
    elif _name.startswith("Test") and _inspect.isclass(_value):
        _methods = vars(_value).items()
        _value = type(_name, (_value,), {{
            method: _{token}(test)
            for method, test in _methods
            if method.startswith("test") and _inspect.isfunction(test)
        }})
    globals()[_name] = _value
"""

_JAVASCRIPT = """afterEach(() => {{
  expect('{token}').toBe('this test must fail');
}});
require('./{copied}');
"""

_SQL = """CREATE FUNCTION test_{token}() RETURNS SETOF text LANGUAGE plpgsql AS $canary$
DECLARE
    test name;
BEGIN
    FOR test IN
        SELECT p.proname FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'test\\_%'
          AND p.proname <> 'test_{token}'
        ORDER BY 1
    LOOP
        RETURN QUERY EXECUTE format('SELECT * FROM public.%I()', test);
    END LOOP;
    RETURN NEXT fail('this test must fail');
END
$canary$;
"""


class Canaries:
    """The canaries of one grading: named by a token of its own, so nothing of them is known
    before the run."""

    def __init__(self, language: str, token: str | None = None) -> None:
        self.language = language
        self.token = token or f"zz{secrets.token_hex(5)}"

    def beside(self, test_files: Mapping[str, str]) -> dict[str, str]:
        """The test files with their canaries."""
        canaries: dict[str, str] = {}
        if self.language == "sql":
            canaries[f"test_{self.token}.sql"] = _SQL.format(token=self.token)
        for path in test_files:
            copied = PurePosixPath(path)
            if self.language == "python" and _python_test(copied):
                canary = copied.with_name(f"test_{self.token}_{copied.name}")
                canaries[str(canary)] = _PYTHON.format(
                    module=f"_{self.token}_{copied.stem}", copied=copied.name, token=self.token
                )
            elif self.language == "javascript" and copied.suffix == ".js":
                canary = copied.with_name(f"{copied.stem}.{self.token}.test.js")
                canaries[str(canary)] = _JAVASCRIPT.format(copied=copied.name, token=self.token)
        return {**test_files, **canaries}

    def apart(self, tests: list[TestResult]) -> tuple[list[TestResult], list[TestResult]]:
        """The mission's tests, and the canaries."""
        canaries = [test for test in tests if self.token in test.id]
        return [test for test in tests if self.token not in test.id], canaries

    def problem(self, tests: list[TestResult]) -> str | None:
        """Why a run's report cannot be trusted: a canary missing, or one that did not fail."""
        mission, canaries = self.apart(tests)
        expected = 1 if self.language == "sql" else len(mission)
        if len(canaries) != expected or any(
            test.outcome not in ("failed", "errored") for test in canaries
        ):
            return NOT_TRUSTED
        return None


def _python_test(path: PurePosixPath) -> bool:
    return path.suffix == ".py" and path.name not in ("conftest.py", "__init__.py")
