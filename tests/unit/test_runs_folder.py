"""Each prover process keeps a locked folder for its runs under the shared work root."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.synchronize import Barrier
from pathlib import Path

from qa.proof import _runs_folder

STARTERS = 8
ROUNDS = 15


def _start(work_root: Path, started: Barrier, made: Barrier, checked: Barrier) -> None:
    try:
        started.wait(10)
        runs, lock = _runs_folder(work_root)
        made.wait(10)  # every starter has swept and made its folder
        survived = runs.is_dir() and (runs / ".lock").exists()
        checked.wait(10)
        lock.close()
    except BaseException:
        for barrier in (started, made, checked):
            barrier.abort()  # the others stop waiting for this one
        os._exit(1)
    os._exit(0 if survived else 1)


def test_processes_starting_together_keep_their_folders(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for _ in range(ROUNDS):
        started, made, checked = (context.Barrier(STARTERS) for _ in range(3))
        starters = [
            context.Process(target=_start, args=(tmp_path, started, made, checked))
            for _ in range(STARTERS)
        ]
        for starter in starters:
            starter.start()
        for starter in starters:
            starter.join(30)
        assert [starter.exitcode for starter in starters] == [0] * STARTERS


def test_the_folder_of_a_process_that_died_is_removed(tmp_path: Path) -> None:
    dead = tmp_path / "prover-dead"
    (dead / "run-1").mkdir(parents=True)
    (dead / ".lock").touch()

    runs, lock = _runs_folder(tmp_path)
    try:
        assert not dead.exists()
        assert sorted(tmp_path.glob("prover-*")) == [runs]
    finally:
        lock.close()
