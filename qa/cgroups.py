"""A cgroup per proof slot, so that the limits on a slot's processes add up to a bound.

prlimit's limits hold per process: a run that forks twenty children may use twenty times the
memory limit. Where the kernel's memory and pids controllers are there to use, each slot gets
a cgroup capping the memory (RAM, and swap where it is counted) and the tasks of everything
its runs start, together. A run's first process joins it before the command starts, and
nothing in it can leave: moving a process takes write access to the other cgroup, which only
root has.

cgroup v2 serves where this process's cgroup, or a delegated cgroup just above it, hands the
memory and pids controllers down (a cgroup that holds processes cannot, so a service needs
systemd's `Delegate=yes` with its process in a subgroup, `DelegateSubgroup=`). Otherwise the
v1 memory and pids hierarchies serve, as on hybrid machines. Either way the slots' cgroups
nest below this process's own, so the limits set on it still hold.

Their parent is named after the lowest uid this process claimed for its slots: a uid is held
machine-wide by one live process, so two warmpool processes never share a parent, and a parent
that a dead process left is its uid's next owner's to remove. Whatever is still in it can only
be that dead process's leftovers, as a uid is claimed only while no process of it is alive.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qa import processes
from qa.slots import Slot

CONTROLLERS = ("memory", "pids")


class CgroupsUnavailable(Exception):
    """No cgroup can cap the slots on this machine; the message says why."""


@dataclass(frozen=True)
class Caps:
    memory: int  # bytes of RAM (and swap) for all of a slot's processes together
    tasks: int  # processes and threads at once


class SlotCgroup:
    """One slot's cgroup: its folder in each hierarchy (v2: one; v1: memory and pids)."""

    def __init__(
        self, folders: tuple[Path, ...], caps: Caps, oom_events: Path, kill: Path | None
    ) -> None:
        self.folders = folders
        self.caps = caps
        self._oom_events = oom_events
        self._kill = kill

    def enter(self, pid: int) -> None:
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(f"{pid}\n")

    def memory_kills(self) -> int:
        """How many processes the memory cap has killed so far: a counter, never reset."""
        for line in self._oom_events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def kill(self) -> None:
        """SIGKILL everything in the cgroup; returns when it holds no process."""
        if self._kill is not None:
            self._kill.write_text("1")  # v2 kills all at once, forks included
        processes.kill_until_gone(lambda: members(self.folders), f"cgroup {self.folders[0]}")


class Cgroups:
    """The slots' cgroups of this process, from `create` until `remove`."""

    def __init__(
        self, version: int, parents: tuple[Path, ...], slots: tuple[SlotCgroup, ...], caps: Caps
    ) -> None:
        self.version = version
        self.parents = parents
        self.caps = caps
        self._slots = slots

    @classmethod
    def create(cls, slots: Sequence[Slot], caps: Caps) -> Cgroups:
        """One cgroup per slot with `caps`; raises CgroupsUnavailable, saying why, if none can."""
        uids = [slot.uid for slot in slots if slot.uid is not None]
        if not uids or len(uids) < len(slots):
            raise CgroupsUnavailable("the slots have no uid of their own")
        version, bases = _bases(_mounts(), _memberships())
        parents = tuple(base / f"warmpool-{min(uids)}" for base in bases)
        try:
            for parent in parents:
                _remove(parent)  # left by this uid's previous owner, who is dead
                parent.mkdir()
            if version == 2:
                (parents[0] / "cgroup.subtree_control").write_text(
                    " ".join(f"+{name}" for name in CONTROLLERS)
                )
            made = tuple(_slot(version, parents, slot.index, caps) for slot in slots)
        except OSError as error:
            for parent in parents:
                _remove(parent)
            raise CgroupsUnavailable(
                f"cgroup v{version} below {bases[0]} cannot be set up: {error}"
            ) from None
        return cls(version, parents, made, caps)

    def slot(self, slot: Slot) -> SlotCgroup:
        return self._slots[slot.index]

    def describe(self) -> str:
        return (
            f"each slot's processes together get at most {self.caps.memory // 2**20} MiB of "
            f"memory and {self.caps.tasks} tasks (cgroup v{self.version})"
        )

    def remove(self) -> None:
        for parent in self.parents:
            _remove(parent)


def members(folders: Sequence[Path]) -> list[int]:
    """The processes in these cgroups (zombies are not listed)."""
    return sorted(
        {int(pid) for folder in folders for pid in (folder / "cgroup.procs").read_text().split()}
    )


def _slot(version: int, parents: tuple[Path, ...], index: int, caps: Caps) -> SlotCgroup:
    folders = tuple(parent / f"slot-{index}" for parent in parents)
    for folder in folders:
        folder.mkdir()
    if version == 2:
        [folder] = folders
        _write(folder / "memory.max", caps.memory)
        _write(folder / "memory.swap.max", 0, optional=True)
        _write(folder / "memory.oom.group", 1, optional=True)  # an OOM kill ends the whole run
        _write(folder / "pids.max", caps.tasks)
        kill = folder / "cgroup.kill"
        return SlotCgroup(folders, caps, folder / "memory.events", kill if kill.exists() else None)
    memory, pids = folders[0], folders[-1]
    _write(memory / "memory.limit_in_bytes", caps.memory)
    # RAM and swap together, so that swap is no way around the cap (where swap is counted).
    _write(memory / "memory.memsw.limit_in_bytes", caps.memory, optional=True)
    _write(pids / "pids.max", caps.tasks)
    return SlotCgroup(folders, caps, memory / "memory.oom_control", None)


def _write(path: Path, value: int, *, optional: bool = False) -> None:
    if optional and not path.exists():
        return
    path.write_text(f"{value}\n")


def _remove(folder: Path, patience_s: float = 5.0) -> None:
    """Kill whatever `folder` and the cgroups below it hold, and remove them, deepest first."""
    if not folder.is_dir():
        return
    for child in folder.iterdir():
        if child.is_dir():
            _remove(child, patience_s)
    processes.kill_until_gone(lambda: members([folder]), f"cgroup {folder}", patience_s)
    deadline = time.monotonic() + patience_s
    while True:
        try:
            folder.rmdir()
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # the killed processes are still on their way out
        else:
            return


@dataclass(frozen=True)
class _Mount:
    point: Path
    root: str  # the folder of the hierarchy mounted there
    kind: str
    options: frozenset[str]


def _mounts() -> list[_Mount]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        rest = fields[fields.index("-") + 1 :]
        found.append(
            _Mount(
                point=Path(_unescape(fields[4])),
                root=_unescape(fields[3]),
                kind=rest[0],
                options=frozenset(rest[2].split(",")),
            )
        )
    return found


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda code: chr(int(code.group(1), 8)), field)


def _memberships() -> dict[str, str]:
    """This process's cgroup per v1 controller, and its v2 cgroup under ""."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _bases(mounts: list[_Mount], memberships: dict[str, str]) -> tuple[int, tuple[Path, ...]]:
    """The version, and the folder per hierarchy that the slots' parents go into."""
    try:
        return 2, (_v2_base(mounts, memberships),)
    except CgroupsUnavailable as v2:
        try:
            bases = (_v1_base(name, mounts, memberships) for name in CONTROLLERS)
            return 1, tuple(dict.fromkeys(bases))  # one folder if both share a hierarchy
        except CgroupsUnavailable as v1:
            raise CgroupsUnavailable(f"{v2}; {v1}") from None


def _v2_base(mounts: list[_Mount], memberships: dict[str, str]) -> Path:
    mount = next((mount for mount in mounts if mount.kind == "cgroup2"), None)
    if mount is None or "" not in memberships:
        raise CgroupsUnavailable("no cgroup v2 hierarchy is mounted")
    own = _folder(mount, memberships[""])
    candidates = [own]
    if own != mount.point and _delegated(own.parent):
        candidates.append(own.parent)
    for candidate in candidates:
        if set(CONTROLLERS) <= _listed(candidate / "cgroup.subtree_control"):
            return candidate
    raise CgroupsUnavailable(
        f"cgroup v2 ({mount.point}): {own} hands no memory and pids controllers to the cgroups "
        "below it"
    )


def _v1_base(controller: str, mounts: list[_Mount], memberships: dict[str, str]) -> Path:
    for mount in mounts:
        if mount.kind == "cgroup" and controller in mount.options and controller in memberships:
            return _folder(mount, memberships[controller])
    raise CgroupsUnavailable(f"no cgroup v1 {controller} hierarchy is mounted")


def _folder(mount: _Mount, path: str) -> Path:
    relative = os.path.relpath(path, mount.root)
    if relative.split("/")[0] == "..":
        raise CgroupsUnavailable(f"this process's cgroup {path} is outside {mount.point}")
    return mount.point / relative


def _listed(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _delegated(folder: Path) -> bool:
    """Marked by systemd as handed over to the service below it."""
    for name in ("trusted.delegate", "user.delegate"):
        try:
            if os.getxattr(folder, name) == b"1":
                return True
        except OSError:
            continue
    return False
