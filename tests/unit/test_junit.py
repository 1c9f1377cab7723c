"""Reading pytest's JUnit XML (xunit1), as pytest 8 writes it."""

from qa import junit
from qa.results import TestResult

REPORT = b"""<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5">
<testcase classname="test_a.TestAdd" name="test_add" file="test_a.py" line="4" time="0.001" />
<testcase classname="test_a" name="test_err" file="test_a.py" line="11" time="0.001">
<error message="failed on setup with &quot;RuntimeError: fixture broke&quot;">trace</error>
</testcase>
<testcase classname="test_a" name="test_skip" file="test_a.py" line="14" time="0.000">
<skipped type="pytest.skip" message="later">test_a.py:15: later</skipped></testcase>
<testcase classname="test_a" name="test_p[2]" file="test_a.py" line="18" time="0.001">
<failure message="assert 2 == 1">x = 2
E       assert 2 == 1</failure></testcase>
<testcase classname="sub.test_c" name="test_y" file="sub/test_c.py" line="0" time="0.000" />
</testsuite></testsuites>"""


def test_each_test_case_becomes_a_verdict_named_as_pytest_names_it() -> None:
    reported = junit.parse(REPORT)

    assert reported.problem is None
    assert reported.tests == [
        TestResult(id="test_a.py::TestAdd::test_add", outcome="passed"),
        TestResult(
            id="test_a.py::test_err",
            outcome="errored",
            message='failed on setup with "RuntimeError: fixture broke"',
        ),
        TestResult(id="test_a.py::test_skip", outcome="skipped", message="later"),
        TestResult(id="test_a.py::test_p[2]", outcome="failed", message="assert 2 == 1"),
        TestResult(id="sub/test_c.py::test_y", outcome="passed"),
    ]


def test_a_module_that_cannot_be_imported_makes_the_run_inconclusive() -> None:
    report = b"""<testsuites><testsuite tests="1" errors="1">
    <testcase classname="" name="test_b" file="test_b.py" time="0.000">
    <error message="collection failure">ImportError while importing test module.
    Traceback:
    test_b.py:1: in &lt;module&gt;
        import nothere
    E   ModuleNotFoundError: No module named 'nothere'</error></testcase></testsuite></testsuites>"""

    assert junit.parse(report).problem == (
        "pytest could not collect test_b.py: ModuleNotFoundError: No module named 'nothere'"
    )


def test_an_internal_error_makes_the_run_inconclusive() -> None:
    report = b"""<testsuites><testsuite><testcase classname="pytest" name="internal">
    <error message="internal error">Traceback (most recent call last):
    SystemExit: 0</error></testcase></testsuite></testsuites>"""

    assert junit.parse(report).problem == "pytest stopped with an internal error: SystemExit: 0"


def test_a_report_that_is_not_xml_is_a_problem() -> None:
    assert (junit.parse(b"all passed, trust me").problem or "").startswith(
        "the JUnit report is not valid XML"
    )


def test_a_report_without_test_cases_reports_no_test() -> None:
    assert junit.parse(b'<testsuites><testsuite tests="0" /></testsuites>').tests == []
