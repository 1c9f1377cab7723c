"""The proof engine: run a mission's tests against its code and report a verdict per test.

Trust follows provenance. Model output is untrusted and runs only in the full sandbox
(bubblewrap, a uid of its own, resource limits). Code that ships with warmpool (the offline
catalog and its procedural mutations) is trusted and may run under resource limits alone, so
the embedded default works on a machine without bubblewrap. SQL runs in Postgres, never on
the host, as a role without privileges, whatever its trust.

`Prover.start` checks at start-up what this machine can prove: one dry run in the sandbox,
each toolchain run once as a proof would run it, pgTAP in the Postgres. `availability` then
says, per language and trust, why not, so the affected domains can be disabled with a clear
message instead of running untrusted code unconfined. It also gives each slot a cgroup where
the machine allows, so that a slot's processes together stay under one memory and task cap;
`describe` says whether they do, or why the limits are per process only.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol, get_args

from qa import toolchain
from qa.cgroups import Caps, Cgroups, CgroupsUnavailable
from qa.databases import DatabasesUnavailable, ProofDatabases
from qa.harnesses import Jest, Pytest
from qa.process_runner import ProcessRunner
from qa.results import ProofLanguage, ProofRun, Trust
from qa.sandbox import GIB, MIB, Isolation, RunLimits, Sandbox
from qa.slots import DEFAULT_LOCK_DIR, SANDBOX_UIDS, NoFreeUid, Slot, Slots, try_lock
from qa.sql_runner import SqlRunner
from qa.workspace import Workspace

LANGUAGES: tuple[ProofLanguage, ...] = get_args(ProofLanguage)
TRUSTS: tuple[Trust, ...] = get_args(Trust)
_ISOLATION: dict[Trust, Isolation] = {"trusted": "limits", "untrusted": "bubblewrap"}
# Far above what a proof needs (20 MiB for pytest's, 50 MiB for Jest's, plus the files it
# writes in its tmpfs, counted too), far below a machine's memory shared among its slots.
SLOT_CAPS = Caps(memory=GIB, tasks=RunLimits.processes)
_BUBBLEWRAP_WITH_SIZE = (0, 8)  # `--size` for the workspace's tmpfs


class ProofUnavailable(RuntimeError):
    """This machine cannot prove code of this language and trust; the message says why."""


class Runner(Protocol):
    """The variation point: how one language's tests run."""

    @property
    def language(self) -> str: ...

    async def run(
        self,
        solution_files: Mapping[str, str],
        test_files: Mapping[str, str],
        *,
        slot: Slot,
        trust: Trust,
    ) -> ProofRun: ...


class Prover:
    def __init__(
        self,
        *,
        slots: Slots,
        runners: Mapping[str, Runner],
        problems: Mapping[tuple[str, Trust], str],
        runs: Path,
        runs_lock: IO[str],
        databases: ProofDatabases | None,
        cgroups: Cgroups | None,
        bounds: str,
    ) -> None:
        self._slots = slots
        self._runners = dict(runners)
        self._problems = dict(problems)
        self._runs = runs
        self._runs_lock = runs_lock
        self._databases = databases
        self._cgroups = cgroups
        self._bounds = bounds

    @classmethod
    async def start(
        cls,
        *,
        work_root: Path,
        toolchain_root: Path,
        postgres_admin_url: str | None,
        slots: int = 2,
        time_limit_s: float = 20.0,
        bubblewrap: str | None = "bwrap",
        uids: range = SANDBOX_UIDS,
        uid_lock_dir: Path = DEFAULT_LOCK_DIR,
    ) -> Prover:
        """Check what this machine can prove and get ready to prove it.

        `work_root` holds the runs' workspaces (each proof's folder is removed after it);
        `toolchain_root` is where `python -m qa.toolchain` installed pytest and Jest;
        `bubblewrap` is the bwrap command, or None to refuse untrusted code outright.
        """
        # Blocking file locks and removals: off the event loop.
        runs, runs_lock = await asyncio.to_thread(_runs_folder, work_root)
        claimed: Slots | None = None
        cgroups: Cgroups | None = None
        try:
            claimed, uid_problem = _claim(slots, uids, uid_lock_dir)
            cgroups, bounds = await asyncio.to_thread(_slot_cgroups, claimed)
            tools = await asyncio.to_thread(toolchain.locate, toolchain_root)
            sandbox, problems = await _check_sandbox(
                bubblewrap, claimed, runs, tools, uid_problem, cgroups
            )
            runners: dict[str, Runner] = {}
            for harness in (Pytest(), Jest()):
                runner = ProcessRunner(
                    harness, sandbox=sandbox, tools=tools, runs=runs, time_limit_s=time_limit_s
                )
                runners[runner.language] = runner
                for trust in TRUSTS:
                    problem = problems.get(("*", trust)) or runner.toolchain_problem()
                    if problem is None:
                        problem = await runner.check(claimed.all[0], _ISOLATION[trust])
                    if problem is not None:
                        problems[runner.language, trust] = problem
            databases, sql_problem = await _open_databases(postgres_admin_url, time_limit_s, slots)
        except BaseException:
            if cgroups is not None:
                await asyncio.to_thread(cgroups.remove)
            if claimed is not None:
                claimed.release()
            await asyncio.to_thread(_remove_own_runs_folder, runs, runs_lock)
            raise
        if databases is not None:
            runners["sql"] = SqlRunner(databases, time_limit_s=time_limit_s)
        if sql_problem is not None:
            problems.update({("sql", trust): sql_problem for trust in TRUSTS})
        elif databases is not None and (unbounded := databases.unbounded()) is not None:
            problems["sql", "untrusted"] = unbounded
        return cls(
            slots=claimed,
            runners=runners,
            problems=problems,
            runs=runs,
            runs_lock=runs_lock,
            databases=databases,
            cgroups=cgroups,
            bounds=bounds,
        )

    def availability(self, language: str, trust: Trust) -> str | None:
        """None when this machine can prove `language` code of this trust, else why not."""
        if language not in LANGUAGES:
            return f"missions of language {language!r} have no code to prove"
        return self._problems.get((language, trust))

    def describe(self) -> list[str]:
        """One line per language and trust, then what bounds a run, for the start-up log."""
        return [
            *(
                f"{language} ({trust}): " + (self.availability(language, trust) or "ready")
                for language in LANGUAGES
                for trust in TRUSTS
            ),
            self._bounds,
        ]

    @property
    def slot_uids(self) -> tuple[int | None, ...]:
        return tuple(slot.uid for slot in self._slots.all)

    @property
    def slot_cgroups(self) -> tuple[Path, ...]:
        """The parent folders of the slots' cgroups, one per hierarchy; none without cgroups."""
        return () if self._cgroups is None else self._cgroups.parents

    async def run(
        self,
        language: str,
        solution_files: Mapping[str, str],
        test_files: Mapping[str, str],
        *,
        trust: Trust,
    ) -> ProofRun:
        """Run `test_files` against `solution_files`; safe to call concurrently."""
        problem = self.availability(language, trust)
        if problem is not None:
            raise ProofUnavailable(problem)
        async with self._slots.acquire() as slot:
            return await self._runners[language].run(
                solution_files, test_files, slot=slot, trust=trust
            )

    async def close(self) -> None:
        if self._databases is not None:
            await self._databases.close()
        if self._cgroups is not None:
            await asyncio.to_thread(self._cgroups.remove)  # while the uids are still ours
        self._slots.release()
        await asyncio.to_thread(_remove_own_runs_folder, self._runs, self._runs_lock)

    async def __aenter__(self) -> Prover:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _slot_cgroups(slots: Slots) -> tuple[Cgroups | None, str]:
    """The slots' cgroups if this machine has them, and the start-up line on what bounds a run."""
    writable = f"an untrusted run writes at most {RunLimits.writable // MIB} MiB"
    try:
        cgroups = Cgroups.create(slots.all, SLOT_CAPS)
    except CgroupsUnavailable as error:
        return None, f"limits: per process only, as no cgroup caps a slot ({error}); {writable}"
    return cgroups, f"limits: {cgroups.describe()}; {writable}"


def _claim(count: int, uids: range, lock_dir: Path) -> tuple[Slots, str | None]:
    try:
        return Slots.claim(count, uids, lock_dir), None
    except NoFreeUid as error:
        # SQL proofs need no uid; nothing else may run (as root, it would run as root).
        return Slots([Slot(index, None) for index in range(count)], []), str(error)


async def _check_sandbox(
    bubblewrap: str | None,
    slots: Slots,
    runs: Path,
    tools: toolchain.Toolchain,
    uid_problem: str | None,
    cgroups: Cgroups | None,
) -> tuple[Sandbox, dict[tuple[str, Trust], str]]:
    """The sandbox, and why python and javascript proofs ("*") of a trust cannot run, if so."""
    prlimit = shutil.which("prlimit")
    bwrap = shutil.which(bubblewrap) if bubblewrap else None
    sandbox = Sandbox(
        prlimit=Path(prlimit or "prlimit"),
        bubblewrap=Path(bwrap) if bwrap else None,
        readonly=tools.readonly_dirs(),
        cgroups=cgroups,
    )
    everywhere = uid_problem
    if everywhere is None and prlimit is None:
        everywhere = "python and javascript proofs need prlimit (Debian package util-linux)"
    if everywhere is None and slots.separate_uids and not toolchain.usable_by_others(runs):
        everywhere = (
            f"the sandbox uids cannot reach the work folder {runs}: choose a work folder "
            "whose parent folders others may enter"
        )
    if everywhere is not None:
        return sandbox, {("*", trust): everywhere for trust in TRUSTS}
    untrusted: str | None = None
    if bwrap is None:
        untrusted = (
            "untrusted code needs bubblewrap (Debian package bubblewrap), but "
            f"{bubblewrap or 'bwrap'} is not installed; refusing to run it unconfined"
        )
    elif (version := await _bubblewrap_version(bwrap)) < _BUBBLEWRAP_WITH_SIZE:
        untrusted = (
            "untrusted code needs bubblewrap 0.8 or later (to bound what a run writes), but "
            f"{bwrap} is {'.'.join(map(str, version))}; refusing to run it unconfined"
        )
    elif not slots.separate_uids:
        untrusted = (
            "untrusted code needs an unprivileged uid of its own per slot, so warmpool must "
            f"start as root (it runs as uid {os.geteuid()}); refusing to run it unconfined"
        )
    else:
        untrusted = await _dry_run(sandbox, slots.all[0], runs)
    return sandbox, {} if untrusted is None else {("*", "untrusted"): untrusted}


async def _bubblewrap_version(bwrap: str) -> tuple[int, ...]:
    """From `bwrap --version` ("bubblewrap 0.8.0"); (0,) when it says no version."""
    process = await asyncio.create_subprocess_exec(
        bwrap, "--version", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    said, _ = await process.communicate()
    *_, version = said.decode(errors="replace").split() or ["0"]
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return (0,)


async def _dry_run(sandbox: Sandbox, slot: Slot, runs: Path) -> str | None:
    """One run of `true` in the full sandbox: does bubblewrap work on this machine?"""
    space = Workspace.create(runs, slot.uid)
    try:
        execution = await sandbox.run(
            [shutil.which("true") or "/bin/true"],
            workspace=space.path,
            slot=slot,
            limits=RunLimits(wall_s=10, address_space=GIB),
            env={},
            isolation="bubblewrap",
        )
    finally:
        space.remove()
    if execution.exit_code == 0:
        return None
    detail = execution.problem or execution.output.strip()[-500:] or "no output"
    return (
        "untrusted code needs bubblewrap with user namespaces, which fail here "
        f"({detail}); refusing to run it unconfined"
    )


async def _open_databases(
    admin_url: str | None, time_limit_s: float, slots: int
) -> tuple[ProofDatabases | None, str | None]:
    if admin_url is None:
        return None, "sql proofs need a PostgreSQL admin URL (none was given)"
    try:
        databases = await ProofDatabases.open(
            admin_url, statement_timeout_s=time_limit_s, connections=slots + 1
        )
    except DatabasesUnavailable as error:
        return None, str(error)
    return databases, None


@contextmanager
def _turn(work_root: Path) -> Iterator[None]:
    """Processes sharing the work root take turns at making and removing run folders: a new
    folder is unlocked between mkdtemp and its lock, and one being removed loses its lock
    file before the rest, so another process could otherwise take it for a dead one's."""
    descriptor = os.open(
        work_root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _runs_folder(work_root: Path) -> tuple[Path, IO[str]]:
    """This process's folder for run workspaces, locked while it lives; folders of processes
    that died (their lock is free) are removed first."""
    work_root.mkdir(parents=True, exist_ok=True)
    with _turn(work_root):
        for leftover in work_root.glob("prover-*"):
            lock = try_lock(leftover / ".lock")
            if lock is not None:
                _remove_runs_folder(leftover, lock)
        runs = Path(tempfile.mkdtemp(prefix="prover-", dir=work_root))
        os.chmod(runs, 0o711)  # sandbox uids may enter their own run folder, not list others
        lock = try_lock(runs / ".lock")
    assert lock is not None
    return runs, lock


def _remove_own_runs_folder(runs: Path, lock: IO[str]) -> None:
    with _turn(runs.parent):
        _remove_runs_folder(runs, lock)


def _remove_runs_folder(runs: Path, lock: IO[str]) -> None:
    Workspace(runs, None).remove()
    lock.close()
