import pytest

from core.domains import Domain, Language
from generation.drafts import MissionDraft, SabotageDraft
from generation.openai.answers import UnusableAnswer
from generation.openai.checks import check_mission, check_sabotage

GOLD = {"count.py": "def count(xs):\n    return len(xs)\n", "words.py": "WORDS = 1\n"}
TESTS = {"test_count.py": "from count import count\n"}
HIDDEN = {"test_count_more.py": "from count import count\n"}
HIDDEN_NAMES = {"python": ["test_z.py"], "javascript": ["z.test.js"], "sql": ["test_z.sql"]}
MISSION = MissionDraft(
    title="t", brief="b", gold_files=GOLD, test_files=TESTS, hidden_test_files=HIDDEN
)


def domain(language: Language = "python") -> Domain:
    return Domain(name="d", kind="technical", language=language, target=1, retire_after=100)


def sabotage(files: dict[str, str]) -> SabotageDraft:
    return SabotageDraft(sabotaged_files=files, bug_summary="s", grader_hint="h")


def test_a_mission_that_follows_the_conventions_passes() -> None:
    assert check_mission(domain(), MISSION) is MISSION
    documents = MissionDraft(title="t", brief="b", gold_files={"memo.md": "m"}, test_files={})
    assert check_mission(domain("none"), documents) is documents


@pytest.mark.parametrize(
    ("language", "gold", "tests", "message"),
    [
        ("python", {}, TESTS, "no gold files"),
        ("python", GOLD, {}, "the python mission has no test files"),
        (
            "python",
            GOLD,
            {"count_test.py": ""},
            r"test files must be named test_\*.py: count_test.py",
        ),
        ("javascript", {"a.js": ""}, {"a.spec.js": ""}, r"named \*.test.js: a.spec.js"),
        ("sql", {"a.sql": ""}, {"checks.sql": ""}, r"named test_\*.sql: checks.sql"),
        (
            "python",
            {**GOLD, "test_helpers.py": ""},
            TESTS,
            "gold files must not be named like tests",
        ),
        ("none", {"memo.md": ""}, {"test_memo.py": ""}, "'none' mission has no tests"),
        ("python", {"../escape.py": ""}, TESTS, r"gold_files has paths .*: \.\./escape\.py"),
        ("python", {"/etc/x.py": ""}, TESTS, "not plain relative file paths"),
        ("python", GOLD, {"./test_a.py": ""}, "test_files has paths that are not plain"),
    ],
)
def test_a_mission_that_breaks_the_conventions_is_malformed(
    language: Language, gold: dict[str, str], tests: dict[str, str], message: str
) -> None:
    hidden = dict.fromkeys(HIDDEN_NAMES.get(language, ()), "")
    draft = MissionDraft(
        title="t", brief="b", gold_files=gold, test_files=tests, hidden_test_files=hidden
    )
    with pytest.raises(UnusableAnswer, match=message) as raised:
        check_mission(domain(language), draft)
    assert raised.value.outcome == "malformed"


@pytest.mark.parametrize(
    ("hidden", "message"),
    [
        ({}, "the python mission has no hidden test files"),
        (TESTS, "hidden test files need paths of their own: test_count.py"),
        ({"more_test.py": ""}, r"test files must be named test_\*.py: more_test.py"),
    ],
)
def test_hidden_tests_are_required_and_apart(hidden: dict[str, str], message: str) -> None:
    draft = MissionDraft(
        title="t", brief="b", gold_files=GOLD, test_files=TESTS, hidden_test_files=hidden
    )
    with pytest.raises(UnusableAnswer, match=message) as raised:
        check_mission(domain(), draft)
    assert raised.value.outcome == "malformed"


def test_a_sabotage_becomes_every_gold_file_with_the_changed_one_in_place() -> None:
    changed = {"count.py": "def count(xs):\n    return len(xs) - 1\n"}
    checked = check_sabotage(domain(), MISSION, sabotage(changed))
    assert checked.sabotaged_files == {**GOLD, **changed}
    assert checked.bug_summary == "s"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"test_count.py": "", "count.py": "x"}, "touches test files, .*: test_count.py"),
        ({"count.py": "x", "test_more.py": ""}, "touches test files, .*: test_more.py"),
        ({"count.py": "x", "helper.py": ""}, "adds files the mission does not have: helper.py"),
        ({"count.py": GOLD["count.py"]}, "changes no gold file"),
        ({}, "changes no gold file"),
    ],
)
def test_a_sabotage_that_touches_tests_or_changes_no_gold_file_is_malformed(
    files: dict[str, str], message: str
) -> None:
    with pytest.raises(UnusableAnswer, match=message):
        check_sabotage(domain(), MISSION, sabotage(files))
