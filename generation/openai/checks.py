"""What makes a model's draft usable beyond its schema: safe paths, tests that follow the
language's conventions, and a sabotage that changes gold code but never the tests."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import NoReturn

import msgspec

from core.domains import Domain, Language
from generation.drafts import Files, MissionDraft, SabotageDraft
from generation.openai.answers import UnusableAnswer

# How each language's test runner tells a test file by its name; `none` has no tests.
TEST_FILE_NAMES: dict[Language, str] = {
    "python": "test_*.py",
    "javascript": "*.test.js",
    "sql": "test_*.sql",
}


def check_mission(domain: Domain, draft: MissionDraft) -> MissionDraft:
    _check_paths(draft.gold_files, "gold_files")
    _check_paths(draft.test_files, "test_files")
    _check_paths(draft.hidden_test_files, "hidden_test_files")
    if not draft.gold_files:
        _malformed("the mission has no gold files")
    pattern = TEST_FILE_NAMES.get(domain.language)
    if pattern is None:
        if draft.test_files or draft.hidden_test_files:
            _malformed(f"a {domain.language!r} mission has no tests, yet it has test files")
        return draft
    if not draft.test_files:
        _malformed(f"the {domain.language} mission has no test files")
    misnamed = [
        path
        for path in [*draft.test_files, *draft.hidden_test_files]
        if not _is_test(path, pattern)
    ]
    if misnamed:
        _malformed(f"test files must be named {pattern}: {_listed(misnamed)}")
    named_as_tests = [path for path in draft.gold_files if _is_test(path, pattern)]
    if named_as_tests:
        _malformed(
            f"gold files must not be named like tests ({pattern}): {_listed(named_as_tests)}"
        )
    if not draft.hidden_test_files:
        _malformed(f"the {domain.language} mission has no hidden test files")
    shared = draft.hidden_test_files.keys() & (draft.test_files.keys() | draft.gold_files.keys())
    if shared:
        _malformed(f"hidden test files need paths of their own: {_listed(list(shared))}")
    return draft


def check_sabotage(domain: Domain, mission: MissionDraft, draft: SabotageDraft) -> SabotageDraft:
    """The sabotage as every gold file, with the answer's changed files in place."""
    changed = draft.sabotaged_files
    pattern = TEST_FILE_NAMES.get(domain.language)
    tests = [
        path
        for path in changed
        if path in mission.test_files or (pattern is not None and _is_test(path, pattern))
    ]
    if tests:
        _malformed(f"the sabotage touches test files, which it must never do: {_listed(tests)}")
    added = [path for path in changed if path not in mission.gold_files]
    if added:
        _malformed(f"the sabotage adds files the mission does not have: {_listed(added)}")
    if all(content == mission.gold_files[path] for path, content in changed.items()):
        _malformed("the sabotage changes no gold file")
    return msgspec.structs.replace(draft, sabotaged_files={**mission.gold_files, **changed})


def _check_paths(files: Files, field: str) -> None:
    unsafe = [path for path in files if not _is_safe(path)]
    if unsafe:
        _malformed(f"{field} has paths that are not plain relative file paths: {_listed(unsafe)}")


def _is_safe(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return (
        bool(parts)
        and str(PurePosixPath(path)) == path
        and not path.startswith("/")
        and "\\" not in path
        and ".." not in parts
    )


def _is_test(path: str, pattern: str) -> bool:
    return fnmatchcase(PurePosixPath(path).name, pattern)


def _listed(paths: list[str]) -> str:
    return ", ".join(sorted(paths))


def _malformed(message: str) -> NoReturn:
    raise UnusableAnswer("malformed", message)
