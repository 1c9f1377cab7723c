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
from tests.support.proving import GRADING_TIME_LIMIT_S, require

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
        time_limit_s=GRADING_TIME_LIMIT_S,
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
        time_limit_s=GRADING_TIME_LIMIT_S,
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


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# A mission of one function whose bug is left in, tested with `is()` as pgTAP missions are,
# after the data each test inserts.
ANSWER_BUG = (
    "CREATE TABLE asked (question text);\n"
    "CREATE FUNCTION answer() RETURNS bigint LANGUAGE sql AS $$ SELECT 41::bigint $$;\n"
)
ANSWER_TESTS = {
    "test_answer.sql": "CREATE FUNCTION test_the_answer() RETURNS SETOF text LANGUAGE plpgsql\n"
    "AS $$ BEGIN\n"
    "    INSERT INTO asked VALUES ('life');\n"
    "    RETURN NEXT is(answer(), 42::bigint, 'the answer');\n"
    "END $$;\n"
}
ANSWER_HIDDEN_TESTS = {
    "test_hidden_answer.sql": "CREATE FUNCTION test_hidden_answer_twice() RETURNS SETOF text\n"
    "LANGUAGE plpgsql AS $$ BEGIN\n"
    "    INSERT INTO asked VALUES ('the universe'), ('everything');\n"
    "    RETURN NEXT is(answer(), 42::bigint, 'once');\n"
    "    RETURN NEXT is(answer() + 0, 42::bigint, 'twice');\n"
    "END $$;\n"
}
# pgTAP's is(anyelement, anyelement, text) loses to a function of the exact argument types,
# wherever it is on the search path.
SHADOW = (
    "CREATE FUNCTION public.is(bigint, bigint, text) RETURNS text LANGUAGE sql "
    "AS $is$ SELECT tap.pass($3) $is$"
)
SHADOWED_IS = f"{SHADOW};\n{ANSWER_BUG}"
# The same function made by the code while a test runs (a trigger of the data it inserts),
# before its assertions.
SHADOWED_DURING_THE_TEST = ANSWER_BUG + (
    "CREATE FUNCTION shadow() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN EXECUTE " + quote_literal(SHADOW) + "; RETURN NULL; END $$;\n"
    "CREATE TRIGGER shadow AFTER INSERT ON asked EXECUTE FUNCTION shadow();\n"
)
# Every assertion after the code runs becomes a TODO, which pgTAP's runner does not count as a
# failure of the test.
TODO_FROM_THE_CODE = ANSWER_BUG.replace(
    "LANGUAGE sql AS $$ SELECT 41::bigint $$",
    "LANGUAGE plpgsql AS $$ BEGIN PERFORM tap.todo_start('later'); RETURN 41; END $$",
)
# pgTAP's runner runs public.teardown* after each test, before it reads the failures' count.
FAILURES_ERASED_AT_TEARDOWN = ANSWER_BUG + (
    "CREATE FUNCTION teardown_results() RETURNS SETOF text LANGUAGE plpgsql AS $$\n"
    "BEGIN PERFORM tap._set('failed', 0); END $$;\n"
)
REFUSED = "is refused: its name is one that pgTAP or its test runner calls"
UNBACKED = "pgTAP counted it as passed, but not every assertion in it passed"


@pytest.mark.parametrize(
    ("forgery", "status", "caught"),
    [
        (SHADOWED_IS, "error", REFUSED),
        (SHADOWED_DURING_THE_TEST, "failed", "did not pass"),
        (TODO_FROM_THE_CODE, "error", UNBACKED),
        (FAILURES_ERASED_AT_TEARDOWN, "error", REFUSED),
    ],
    ids=[
        "shadowed-assertion",
        "shadowed-during-the-test",
        "todo-from-the-code",
        "failures-erased-at-teardown",
    ],
)
async def test_a_forged_pgtap_pass_is_never_a_pass(
    prover: Prover, forgery: str, status: str, caught: str
) -> None:
    """Each is caught where pgTAP is guarded (see proof_database.sql and qa/sql_runner.py),
    before the canaries, which would catch the last two too."""
    require(prover, "sql", "untrusted")
    gold = {"answer.sql": ANSWER_BUG.replace("41", "42")}
    proven = await prover.run("sql", gold, ANSWER_HIDDEN_TESTS, trust="trusted")
    expected = hidden_test_ids(proven)
    honest = await grade(
        prover,
        "sql",
        {"answer.sql": ANSWER_BUG},
        ANSWER_TESTS,
        ANSWER_HIDDEN_TESTS,
        expected,
        time_limit_s=GRADING_TIME_LIMIT_S,
    )
    assert honest.status == "failed"

    verdict = await grade(
        prover,
        "sql",
        {"answer.sql": forgery},
        ANSWER_TESTS,
        ANSWER_HIDDEN_TESTS,
        expected,
        time_limit_s=GRADING_TIME_LIMIT_S,
    )

    assert verdict.status == status, verdict
    assert caught in (verdict.error or ""), verdict
    assert verdict.visible.passed == verdict.hidden.passed == 0, verdict
