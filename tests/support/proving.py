"""Helpers for proof tests: the toolchain, what a test requires of the prover, and what a run
may not leave behind."""

from __future__ import annotations

from pathlib import Path

from qa import cgroups, processes, toolchain
from qa.proof import Prover
from qa.results import Trust
from server import places
from tests.support.tools import need

ROOT = Path(__file__).resolve().parents[2]
# A grading's in the proof tests, both runs together: the `prover` fixture's per run.
GRADING_TIME_LIMIT_S = 30
# Where `warmpool toolchain` installs it for this checkout's data folder.
TOOLCHAIN = places.of(ROOT / ".warmpool").toolchain


def ensure_toolchain() -> Path:
    """The toolchain `scripts/toolchain` installs (CI runs it first); installed here if missing."""
    tools = toolchain.locate(TOOLCHAIN)
    if tools.python_problem() or tools.javascript_problem():
        try:
            toolchain.install(TOOLCHAIN)
        except toolchain.ToolchainError as error:
            need(False, f"the proof toolchain cannot be installed: {error}")
    return TOOLCHAIN


def require(prover: Prover, language: str, trust: Trust) -> None:
    reason = prover.availability(language, trust)
    need(reason is None, reason or "")


def leftovers(
    uids: tuple[int | None, ...], work_root: Path, slot_cgroups: tuple[Path, ...] = ()
) -> list[str]:
    """Processes of the sandbox uids (even zombies) or in the slots' cgroups, and run folders
    still on disk."""
    found = [
        f"uid {process.uids} process {process.pid}{' (zombie)' if process.zombie else ''}"
        for process in processes.processes()
        if any(uid in process.uids for uid in uids if uid is not None)
    ]
    found += [
        f"process {pid} in cgroup {folder}"
        for parent in slot_cgroups
        for folder in [parent, *(path for path in parent.rglob("*") if path.is_dir())]
        for pid in cgroups.members([folder])
    ]
    return found + [f"folder {run}" for run in sorted(work_root.glob("prover-*/run-*"))]
