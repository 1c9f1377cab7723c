"""The per-run folder: the mission's files and synthesized dependencies, the only place a run
may write. Its report file is made empty beforehand (the one file that a run in bubblewrap
writes on the host), read back without following links, and the folder is removed whatever
happened in it.

Mission files come from a model, so their paths are checked before anything is written:
relative, plain names, nothing under the reserved `.proof/` folder where runners write their
reports and keep HOME and TMPDIR.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path

REPORTS = ".proof"
MAX_FILES = 100
MAX_BYTES = 1024 * 1024
# No leading "-": a path must never read as a command-line option.
_SEGMENT = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,99}$")


class InvalidFiles(ValueError):
    """The mission's files cannot be laid out; the message names the file and the rule."""


class UnreadableReport(Exception):
    """A runner's report is missing or is not a plain file of bounded size."""


def check(solution_files: Mapping[str, str], test_files: Mapping[str, str]) -> None:
    if not test_files:
        raise InvalidFiles("no test files: there is nothing to run")
    both = solution_files.keys() & test_files.keys()
    if both:
        raise InvalidFiles(f"{sorted(both)[0]!r} is both a solution file and a test file")
    files = {**solution_files, **test_files}
    if len(files) > MAX_FILES:
        raise InvalidFiles(f"{len(files)} files; at most {MAX_FILES} are accepted")
    size = sum(len(content.encode()) for content in files.values())
    if size > MAX_BYTES:
        raise InvalidFiles(f"the files hold {size} bytes; at most {MAX_BYTES} are accepted")
    for path in files:
        _check_path(path)


def _check_path(path: str) -> None:
    segments = path.split("/")
    if len(path) > 200 or not all(_SEGMENT.match(segment) for segment in segments):
        raise InvalidFiles(
            f"file path {path!r} is not accepted: use a relative path of letters, digits, "
            "'.', '_' and '-' (not first), with '/' between folders"
        )
    if any(segment in (".", "..") for segment in segments):
        raise InvalidFiles(f"file path {path!r} is not accepted: no '.' or '..' folders")
    if segments[0] == REPORTS:
        raise InvalidFiles(f"file path {path!r} is not accepted: {REPORTS}/ is reserved")


class Workspace:
    def __init__(self, path: Path, owner: int | None) -> None:
        self.path = path
        self._owner = owner

    @classmethod
    def create(cls, parent: Path, owner: int | None) -> Workspace:
        """A fresh folder that only `owner` (the run's uid; None: this process's) may enter."""
        workspace = cls(parent / f"run-{secrets.token_hex(8)}", owner)
        workspace._make_dir(workspace.path, mode=0o700)
        for folder in ("", "home", "tmp"):
            workspace._make_dir(workspace.path / REPORTS / folder, mode=0o700)
        return workspace

    def write(self, files: Mapping[str, str]) -> None:
        for relative, content in files.items():
            target = self.path / relative
            for folder in reversed(target.relative_to(self.path).parents[:-1]):
                if not (self.path / folder).is_dir():
                    self._make_dir(self.path / folder, mode=0o755)
            descriptor = os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644
            )
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(content)
            self._own(target)

    def expect_report(self, name: str) -> str:
        """An empty `.proof/<name>` for the runner to write; its path in the workspace."""
        self.write({f"{REPORTS}/{name}": ""})
        return f"{REPORTS}/{name}"

    def read_report(self, name: str, limit: int) -> bytes:
        """Read `.proof/<name>`: a regular file, reached without following any link."""
        shown = f"{REPORTS}/{name}"
        directory = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            reports = os.open(
                REPORTS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory
            )
            try:
                descriptor = os.open(
                    name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=reports
                )
            finally:
                os.close(reports)
        except FileNotFoundError:
            raise UnreadableReport(f"the runner wrote no report ({shown})") from None
        except OSError as error:
            raise UnreadableReport(f"{shown} cannot be opened: {error.strerror}") from None
        finally:
            os.close(directory)
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise UnreadableReport(f"{shown} is not a regular file")
            data = file.read(limit + 1)
        if not data:
            raise UnreadableReport(f"the runner wrote no report ({shown})")
        if len(data) > limit:
            raise UnreadableReport(f"{shown} is larger than {limit} bytes")
        return data

    def remove(self) -> None:
        try:
            shutil.rmtree(self.path)
        except FileNotFoundError:
            return
        except OSError:
            # A run under this process's own uid may have locked folders (chmod 000): reopen them.
            os.chmod(self.path, 0o700)
            for folder, _, _ in os.walk(self.path):
                os.chmod(folder, 0o700)
            shutil.rmtree(self.path, ignore_errors=True)

    def _make_dir(self, path: Path, mode: int) -> None:
        path.mkdir(mode=mode)
        self._own(path)

    def _own(self, path: Path) -> None:
        if self._owner is not None:
            os.chown(path, self._owner, self._owner, follow_symlinks=False)
