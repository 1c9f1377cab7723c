"""Reading pytest's JUnit XML report (the xunit1 flavour, where each test case names its file).

A test module that cannot be imported, or a pytest that stops with an internal error, shows
up as a test case with a special error; it makes the whole run inconclusive rather than a
failed test, because such a run says nothing about the code's behaviour.
"""

from __future__ import annotations

from xml.etree import ElementTree

from qa.results import Outcome, Reported, TestResult, short

_UNRUNNABLE = {
    "collection failure": "pytest could not collect {file}",
    "internal error": "pytest stopped with an internal error",
}

_MARKS: tuple[tuple[str, Outcome], ...] = (
    ("failure", "failed"),
    ("error", "errored"),
    ("skipped", "skipped"),
)


def parse(report: bytes) -> Reported:
    try:
        root = ElementTree.fromstring(report)
    except ElementTree.ParseError as error:
        return Reported([], f"the JUnit report is not valid XML ({error})")
    tests: list[TestResult] = []
    for case in root.iter("testcase"):
        trouble = case.find("error")
        if trouble is not None and trouble.get("message") in _UNRUNNABLE:
            what = _UNRUNNABLE[trouble.get("message", "")].format(file=case.get("file", "a file"))
            return Reported([], f"{what}: {_last_line(trouble.text)}")
        outcome, message = _outcome(case)
        tests.append(TestResult(id=_test_id(case), outcome=outcome, message=message))
    return Reported(tests)


def _outcome(case: ElementTree.Element) -> tuple[Outcome, str]:
    for tag, outcome in _MARKS:
        element = case.find(tag)
        if element is not None:
            return outcome, short(element.get("message") or _last_line(element.text))
    return "passed", ""


def _test_id(case: ElementTree.Element) -> str:
    """`path/test_file.py::Class::test_name[param]`, as pytest itself names tests."""
    file = case.get("file", "")
    name = case.get("name", "")
    module = file.removesuffix(".py").replace("/", ".")
    classes = case.get("classname", "").removeprefix(module).strip(".")
    return "::".join(part for part in (file, *classes.split("."), name) if part)


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return "no details"
    return short(lines[-1].removeprefix("E").strip())
