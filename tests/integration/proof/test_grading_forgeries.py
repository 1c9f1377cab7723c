"""Fixes that leave the planted bug in and make the test runner report a pass anyway, graded in
the real untrusted sandbox: each is judged `failed` by its canaries (or `error`), never `passed`.
"""

from __future__ import annotations

import pytest

from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from qa.canaries import NOT_TRUSTED
from qa.grading import Verdict, grade, hidden_test_ids
from qa.proof import Prover
from tests.support.proving import require

# Two lines at the top of a module: every pytest test "runs" without running.
NO_OP_TESTS = "import _pytest.python as _p\n_p.Function.runtest = lambda self: None\n"
# At exit, a JUnit report naming every test of every test file it finds as passed, written over
# pytest's own, and an exit status of 0.
REWRITTEN_JUNIT = """
import atexit as _atexit, ast as _ast, glob as _glob, os as _os
def _forge():
    cases = []
    for name in sorted(_glob.glob("test_*.py")):
        for node in _ast.parse(open(name).read()).body:
            if isinstance(node, _ast.FunctionDef) and node.name.startswith("test"):
                cases.append('<testcase classname="%s" name="%s" file="%s"/>'
                             % (name[:-3], node.name, name))
    for report in _glob.glob(".proof/*.xml"):
        open(report, "w").write("<testsuites><testsuite>%s</testsuite></testsuites>"
                                % "".join(cases))
    _os._exit(0)
_atexit.register(_forge)
"""
# The test file's `expect` (its module runs in the test file's context) made to accept anything.
NEUTERED_EXPECT = """
const _anything = new Proxy(function () {}, { get: () => _anything, apply: () => _anything });
globalThis.expect = _anything;
"""
# At exit, Jest's JSON report rewritten: every test passed; and an exit status of 0. The test
# file's `process` is Jest's stand-in, but a function of Node's own realm reaches the real one.
REWRITTEN_JEST_REPORT = """
const _fs = require('fs');
const _process = _fs.readFileSync.constructor('return process')();
_process.on('exit', () => {
  const report = JSON.parse(_fs.readFileSync('.proof/jest.json', 'utf8'));
  for (const suite of report.testResults) {
    suite.status = 'passed';
    suite.message = '';
    for (const test of suite.assertionResults) {
      test.status = 'passed';
      test.failureMessages = [];
    }
  }
  report.numFailedTests = 0;
  report.numFailedTestSuites = 0;
  report.success = true;
  _fs.writeFileSync('.proof/jest.json', JSON.stringify(report));
  _process.reallyExit(0);
});
"""


def first(language: str) -> CatalogMission:
    return next(mission for mission in catalog.load() if mission.language == language)


async def graded_with_the_bug(prover: Prover, mission: CatalogMission, forgery: str) -> Verdict:
    require(prover, mission.language, "untrusted")
    proven = await prover.run(
        mission.language, mission.gold_files, mission.hidden_test_files, trust="trusted"
    )
    bug = saboteur.sabotage(mission, seed=1, try_number=1).sabotaged_files
    honest = await grade(
        prover,
        mission.language,
        bug,
        mission.test_files,
        mission.hidden_test_files,
        hidden_test_ids(proven),
    )
    assert honest.status == "failed"  # the bug is there to be caught
    forged = {path: forgery + code for path, code in bug.items()}
    return await grade(
        prover,
        mission.language,
        forged,
        mission.test_files,
        mission.hidden_test_files,
        hidden_test_ids(proven),
    )


@pytest.mark.parametrize(
    ("language", "forgery"),
    [
        ("python", NO_OP_TESTS),
        ("python", REWRITTEN_JUNIT),
        ("javascript", NEUTERED_EXPECT),
        ("javascript", REWRITTEN_JEST_REPORT),
    ],
    ids=[
        "pytest-no-op-tests",
        "pytest-rewritten-report",
        "jest-neutered-expect",
        "jest-rewritten-report",
    ],
)
async def test_a_forged_pass_is_caught_by_the_canaries(
    prover: Prover, language: str, forgery: str
) -> None:
    verdict = await graded_with_the_bug(prover, first(language), forgery)

    assert (verdict.status, verdict.error) == ("failed", NOT_TRUSTED)
    assert verdict.visible.passed == verdict.hidden.passed == 0
    assert verdict.tests == []
