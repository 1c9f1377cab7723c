"""Processes as /proc shows them: which belong to a uid or to a parent, and killing every
process of a uid (or of any set that can be listed again), by pid, until none is left.

The uid comes from the `Uid:` line of /proc/<pid>/status (the real uid), not from the owner
of /proc/<pid>, which a process can turn to root by making itself non-dumpable.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple


class Process(NamedTuple):
    pid: int
    parent: int
    uids: frozenset[int]  # real, effective, saved and filesystem uid
    zombie: bool


def processes() -> Iterator[Process]:
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="utf-8", errors="replace") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue  # gone meanwhile
        yield Process(
            pid=int(entry.name),
            parent=int(fields["PPid"]),
            uids=frozenset(int(uid) for uid in fields["Uid"].split()),
            zombie=fields["State"].strip().startswith(("Z", "X")),
        )


def living(uid: int) -> list[int]:
    return [p.pid for p in processes() if uid in p.uids and not p.zombie]


def uid_in_use(uid: int) -> bool:
    """Any process of `uid`, dead or alive: an unreaped zombie still counts against the
    uid's process limit."""
    return any(uid in p.uids for p in processes())


def children(pid: int) -> list[int]:
    return [p.pid for p in processes() if p.parent == pid]


def kill_all(uid: int, patience_s: float = 5.0) -> None:
    """SIGKILL every process of `uid` until /proc shows none alive."""
    kill_until_gone(lambda: living(uid), f"uid {uid}", patience_s)


def kill_until_gone(members: Callable[[], list[int]], owner: str, patience_s: float = 5.0) -> None:
    """SIGKILL every process `members` lists, again and again, until it lists none.

    A process that forks between two passes is caught by the next one; a killed process can
    no longer fork, so the passes end, and a process limit keeps them short.
    """
    deadline = time.monotonic() + patience_s
    while pids := members():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of {owner} survive SIGKILL: {pids}")
        time.sleep(0.002)
