"""Running one command confined, and leaving nothing of it behind.

Every run starts with an empty environment, as its slot's uid, under resource limits set by
`prlimit` (CPU seconds, address space, processes, file size, open files, no core files),
in its own session. Where the slot has a cgroup, the run's first process joins it before the
command starts (a shell waits on a pipe until it is in), so that the memory and the tasks of
all the run's processes together stay under the slot's caps.

Untrusted code also runs inside bubblewrap: no network, no other processes in sight, the
system and toolchains mounted read-only, and the command as the namespace's first process,
so the whole namespace dies with it. Its workspace is a tmpfs of `RunLimits.writable` bytes
holding copies of the workspace's files: the only writable place, so that what a run writes
in all is bounded, and gone with the namespace. Only its outputs (the report) are the
host's files, each bounded by the file size limit.

A hard time limit and an output cap end a run with SIGKILL. Whatever ends it (the command,
a limit, a crash, the caller's cancellation), every process of the run is killed before
`run` returns: the sandbox first, then everything in the slot's cgroup, then anything still
alive under the slot's uid, found by pid, including processes that left the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from qa import processes
from qa.cgroups import Cgroups, SlotCgroup
from qa.slots import Slot

MIB = 1024 * 1024
GIB = 1024 * MIB
_HEAD_BYTES = 16 * 1024
_TAIL_BYTES = 48 * 1024

Isolation = Literal["bubblewrap", "limits"]

# Read-only beside /usr, where a dynamic loader and runtimes look.
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives")
_MERGED_USR = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Holds a run until its first process is in the slot's cgroup: the parent writes a line once
# it is (end of file instead: the run never starts).
_HOLD = ("/bin/sh", "-c", 'read -r go && exec "$@" </dev/null', "hold")


@dataclass(frozen=True)
class RunLimits:
    wall_s: float
    address_space: int
    processes: int = 64
    file_size: int = 64 * MIB
    open_files: int = 512
    output: int = 8 * MIB
    writable: int = 256 * MIB  # all files together, in bubblewrap

    def prlimit_options(self) -> list[str]:
        return [
            f"--cpu={math.ceil(self.wall_s) + 1}",
            f"--as={self.address_space}",
            f"--nproc={self.processes}",
            f"--fsize={self.file_size}",
            f"--nofile={self.open_files}",
            "--core=0",
        ]


@dataclass(frozen=True)
class Execution:
    exit_code: int | None  # None when the sandbox ended the run
    problem: str | None  # why the run proves nothing, if the sandbox knows
    output: str  # stdout and stderr together, the start and the end when long
    duration_s: float


class Sandbox:
    def __init__(
        self,
        *,
        prlimit: Path,
        bubblewrap: Path | None,
        readonly: Sequence[Path],
        cgroups: Cgroups | None = None,
    ) -> None:
        self._prlimit = prlimit
        self._bubblewrap = bubblewrap
        self._readonly = tuple(readonly)
        self._cgroups = cgroups

    async def run(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        slot: Slot,
        limits: RunLimits,
        env: Mapping[str, str],
        isolation: Isolation,
        outputs: Sequence[str] = (),
    ) -> Execution:
        """Run `argv` in `workspace`; `outputs` are files there (already made) that the run
        writes for the host to read."""
        cgroup = None if self._cgroups is None else self._cgroups.slot(slot)
        memory_kills = 0 if cgroup is None else cgroup.memory_kills()
        command = [str(self._prlimit), *limits.prlimit_options(), "--"]
        copies: list[int] = []
        if isolation == "bubblewrap":
            options, copies = self._bubblewrap_options(workspace, outputs, limits.writable)
            command += options
        started = time.monotonic()
        try:
            transport, run, release = await _spawn(
                [*command, *argv], workspace, slot, env, limits.output, copies, cgroup is not None
            )
        except BaseException:
            _kill_leftovers(slot, cgroup)  # cancelled while starting: it may have started
            raise
        problem: str | None = None
        try:
            if cgroup is not None and release is not None:
                problem = _let_in(cgroup, transport.get_pid(), release)
            if problem is None:
                done, _ = await asyncio.wait(
                    {run.exited, run.overflowed},
                    timeout=limits.wall_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if run.overflowed.done():
                    problem = f"printed more than {limits.output // MIB} MiB of output"
                elif not done:
                    problem = f"timed out after {limits.wall_s:g} s"
        finally:
            await _stop(transport.get_pid(), run.exited, slot, isolation, cgroup)
            transport.close()
        if cgroup is not None and (killed := cgroup.memory_kills() - memory_kills) > 0:
            # First: a timeout or a crash after a kill is its consequence.
            problem = (
                f"the run's processes together went over the slot's {cgroup.caps.memory // MIB} "
                f"MiB memory cap: the kernel killed {killed} of them"
            )
        exit_code = None if problem else transport.get_returncode()
        return Execution(
            exit_code=exit_code,
            problem=problem or _killed_by(exit_code, isolation, limits),
            output=run.output(),
            duration_s=time.monotonic() - started,
        )

    def _bubblewrap_options(
        self, workspace: Path, outputs: Sequence[str], writable: int
    ) -> tuple[list[str], list[int]]:
        """The options, and the descriptors of the workspace's files they copy in."""
        assert self._bubblewrap is not None
        options = [
            str(self._bubblewrap),
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--hostname",
            "proof",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for name in _MERGED_USR:
            path = Path("/") / name
            if path.is_symlink():
                options += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                options += ["--ro-bind", str(path), str(path)]
        for file in _SYSTEM_FILES:
            options += ["--ro-bind-try", file, file]
        for folder in self._readonly:
            options += ["--ro-bind", str(folder), str(folder)]
        options += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
        copy, copies = _workspace_copy(workspace, outputs, writable)
        options += [*copy, "--chdir", str(workspace)]
        return [*options, "--remount-ro", "/", "--"], copies


async def _spawn(
    command: list[str],
    workspace: Path,
    slot: Slot,
    env: Mapping[str, str],
    output: int,
    copies: list[int],
    held: bool,
) -> tuple[asyncio.SubprocessTransport, _Run, int | None]:
    """The started run, and when `held`, the pipe end that lets it go (see `_let_in`). The
    descriptors in `copies` are passed to it, and closed here."""
    stdin: int = subprocess.DEVNULL
    release: int | None = None
    try:
        if held:
            stdin, release = os.pipe()
            command = [*_HOLD, *command]
        loop = asyncio.get_running_loop()
        transport, run = await loop.subprocess_exec(
            lambda: _Run(output, loop),
            *command,
            cwd=workspace,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=copies,
            start_new_session=True,
            umask=0o077,
            user=slot.uid,
            group=slot.uid,
            extra_groups=None if slot.uid is None else [],
        )
    except BaseException:
        _close(release)
        raise
    finally:
        _close(*copies, stdin if held else None)
    return transport, run, release


def _workspace_copy(
    workspace: Path, outputs: Sequence[str], size: int
) -> tuple[list[str], list[int]]:
    """The workspace as a tmpfs of `size` bytes holding a copy of each of its files (read from
    a descriptor passed to bubblewrap), but for `outputs`, bound to the host's files."""
    bound = {workspace / output for output in outputs}
    options = ["--size", str(size), "--tmpfs", str(workspace)]
    copies: list[int] = []
    try:
        for folder, subfolders, files in os.walk(workspace):
            for name in subfolders:
                options += ["--dir", os.path.join(folder, name)]
            for name in files:
                path = Path(folder) / name
                if path in bound:
                    options += ["--bind", str(path), str(path)]
                else:
                    copies.append(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC))
                    options += ["--file", str(copies[-1]), str(path)]
    except BaseException:
        _close(*copies)
        raise
    return options, copies


def _let_in(cgroup: SlotCgroup, pid: int, release: int) -> str | None:
    """Put the held run into its slot's cgroup, then let it go; why not, if it cannot join.
    Closing the pipe without a line ends the run before its command starts."""
    try:
        cgroup.enter(pid)
        os.write(release, b"\n")
    except OSError as error:
        return f"the run could not join its slot's cgroup ({error})"
    finally:
        os.close(release)
    return None


async def _stop(
    pid: int,
    exited: asyncio.Future[None],
    slot: Slot,
    isolation: Isolation,
    cgroup: SlotCgroup | None,
) -> None:
    try:
        if not exited.done():
            if isolation == "bubblewrap":
                # The namespace's first process: its death kills and reaps the rest, and
                # bubblewrap, its parent, then exits by itself (no orphan for init to reap).
                _kill(*processes.children(pid))
            else:
                _kill_group(pid)
            try:
                await asyncio.wait_for(asyncio.shield(exited), timeout=2)
            except TimeoutError:
                _kill_group(pid)
                await exited
        elif isolation == "limits":
            _kill_group(pid)  # what the command left in its session
    finally:
        _kill_leftovers(slot, cgroup)


def _kill_leftovers(slot: Slot, cgroup: SlotCgroup | None) -> None:
    """What left the session or the namespace: nothing leaves the cgroup, or the uid."""
    if cgroup is not None:
        cgroup.kill()
    if slot.uid is not None:
        processes.kill_all(slot.uid)


def _close(*descriptors: int | None) -> None:
    for descriptor in descriptors:
        if descriptor is not None:
            os.close(descriptor)


def _kill(*pids: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def _killed_by(exit_code: int | None, isolation: Isolation, limits: RunLimits) -> str | None:
    if exit_code is None:
        return None
    number = -exit_code
    if isolation == "bubblewrap" and exit_code > 128:
        number = exit_code - 128  # bubblewrap reports a signal death as 128 + the signal
    try:
        name = signal.Signals(number).name
    except ValueError:
        return None
    explained = {
        "SIGXCPU": f"used up its {math.ceil(limits.wall_s) + 1} s of CPU time",
        "SIGXFSZ": f"wrote a file past the {limits.file_size // MIB} MiB limit",
        "SIGKILL": "was killed (out of memory, or the CPU time limit)",
    }
    return f"the runner {explained.get(name, f'was killed by {name}')}"


class _Run(asyncio.SubprocessProtocol):
    """Keeps the start and the end of a run's output, and tells when it exits or passes its
    output cap. The exit counts when the process ends, even if something still holds the pipe."""

    def __init__(self, cap: int, loop: asyncio.AbstractEventLoop) -> None:
        self._cap = cap
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self.exited: asyncio.Future[None] = loop.create_future()
        self.overflowed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._total += len(data)
        room = _HEAD_BYTES - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        self._tail += data
        del self._tail[:-_TAIL_BYTES]
        if self._total > self._cap and not self.overflowed.done():
            self.overflowed.set_result(None)

    def process_exited(self) -> None:
        self.exited.set_result(None)

    def output(self) -> str:
        left_out = self._total - len(self._head) - len(self._tail)
        middle = f"\n[... {left_out} bytes of output left out ...]\n" if left_out > 0 else ""
        return (bytes(self._head) + middle.encode() + bytes(self._tail)).decode(errors="replace")
