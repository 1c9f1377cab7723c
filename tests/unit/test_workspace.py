"""The run folder: model-written paths are checked, reports are read without following links,
and the folder goes away whatever was done to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qa import workspace
from qa.workspace import REPORTS, InvalidFiles, UnreadableReport, Workspace

TESTS = {"test_a.py": "def test_a(): pass\n"}


@pytest.mark.parametrize(
    "path",
    [
        "../escape.py",
        "/etc/passwd",
        "a//b.py",
        "a/./b.py",
        "-rf.py",
        ".proof/junit.xml",
        "a\\b.py",
        "",
    ],
)
def test_paths_that_could_escape_or_confuse_are_refused(path: str) -> None:
    with pytest.raises(InvalidFiles, match="is not accepted"):
        workspace.check({path: ""}, TESTS)


def test_plain_nested_paths_are_accepted() -> None:
    workspace.check({"src/shop/cart.py": "", "README.md": ""}, {"tests/test_cart.py": ""})


def test_a_file_that_is_both_solution_and_test_is_refused() -> None:
    with pytest.raises(InvalidFiles, match="both a solution file and a test file"):
        workspace.check(TESTS, TESTS)


def test_no_test_file_is_refused() -> None:
    with pytest.raises(InvalidFiles, match="no test files"):
        workspace.check({"a.py": ""}, {})


def test_files_are_written_where_their_paths_say(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)
    space.write({"src/shop/cart.py": "total = 1\n"})

    assert (space.path / "src/shop/cart.py").read_text() == "total = 1\n"
    assert (space.path / REPORTS / "tmp").is_dir()


def test_a_report_is_read_when_it_is_a_plain_file(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)
    (space.path / REPORTS / "junit.xml").write_bytes(b"<testsuites/>")

    assert space.read_report("junit.xml", limit=100) == b"<testsuites/>"


def test_a_missing_report_says_the_runner_wrote_none(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)

    with pytest.raises(UnreadableReport, match=r"the runner wrote no report \(.proof/junit.xml\)"):
        space.read_report("junit.xml", limit=100)


def test_an_expected_report_left_empty_says_the_runner_wrote_none(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)

    assert space.expect_report("junit.xml") == ".proof/junit.xml"
    with pytest.raises(UnreadableReport, match=r"the runner wrote no report \(.proof/junit.xml\)"):
        space.read_report("junit.xml", limit=100)


def test_a_report_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host file")
    space = Workspace.create(tmp_path, owner=None)
    (space.path / REPORTS / "junit.xml").symlink_to(secret)

    with pytest.raises(UnreadableReport, match="cannot be opened"):
        space.read_report("junit.xml", limit=100)


def test_a_reports_folder_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "junit.xml").write_text("<testsuites/>")
    space = Workspace.create(tmp_path, owner=None)
    (space.path / REPORTS / "home").rmdir()
    (space.path / REPORTS / "tmp").rmdir()
    (space.path / REPORTS).rmdir()
    (space.path / REPORTS).symlink_to(elsewhere)

    with pytest.raises(UnreadableReport, match="cannot be opened"):
        space.read_report("junit.xml", limit=100)


def test_a_report_that_is_a_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)
    os.mkfifo(space.path / REPORTS / "junit.xml")

    with pytest.raises(UnreadableReport, match="is not a regular file"):
        space.read_report("junit.xml", limit=100)


def test_a_report_past_its_size_limit_is_refused(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)
    (space.path / REPORTS / "junit.xml").write_bytes(b"x" * 101)

    with pytest.raises(UnreadableReport, match="is larger than 100 bytes"):
        space.read_report("junit.xml", limit=100)


def test_the_folder_goes_away_even_when_locked(tmp_path: Path) -> None:
    space = Workspace.create(tmp_path, owner=None)
    space.write({"deep/inside/file.py": ""})
    (space.path / "deep").chmod(0)
    space.path.chmod(0)

    space.remove()

    assert not space.path.exists()
