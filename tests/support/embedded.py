"""The embedded PostgreSQL in tests: the processes serving a data folder, stopping them, and
the keys that `serve` prints on its first start."""

from __future__ import annotations

import contextlib
import re
import signal
from pathlib import Path

import psutil

from server.auth import ROLES, Role

# What `serve` prints on the first start: a heading, then one "  <role> <key>" line per role.
KEY = re.compile(r"wp_[A-Za-z0-9_-]{32,}")
KEY_LINE = re.compile(rf"^\s*(?P<role>{'|'.join(ROLES)})\s+(?P<key>{KEY.pattern})\s*$", re.M)


def postgres_processes(pgdata: Path) -> list[psutil.Process]:
    """The postmaster serving `pgdata` (its command line names the folder), and its children."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline and Path(cmdline[0]).name == "postgres" and str(pgdata) in cmdline:
            found.append(process)
            with contextlib.suppress(psutil.NoSuchProcess):  # it may be exiting right now
                found.extend(process.children(recursive=True))
    return found


def stop_postgres(pgdata: Path) -> None:
    """A fast shutdown of whatever PostgreSQL still serves `pgdata`, so none outlives its test."""
    processes = postgres_processes(pgdata)
    if processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            processes[0].send_signal(signal.SIGINT)  # the postmaster: a fast shutdown
    _, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def printed_keys(output: str) -> dict[Role, str]:
    lines = KEY_LINE.findall(output)
    assert sorted(role for role, _ in lines) == sorted(ROLES), f"one key per role:\n{output}"
    keys = {role: key for role in ROLES for printed, key in lines if printed == role}
    assert sorted(KEY.findall(output)) == sorted(keys.values()), "each key shows once, unlogged"
    return keys
