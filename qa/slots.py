"""Parallel proof slots, each with its own unprivileged uid.

The process limit counts processes per real uid and does not hold for root, so each slot
needs a real uid of its own, used by nothing else: then the limit binds a fork bomb, and
killing "everything of that uid" after a run touches no one else. Uids are claimed
machine-wide with a lock file per uid, held for the life of the process, so several
warmpool processes (or test runs) on one machine never share one.

Switching uids needs root; a server started as another user runs proofs under its own uid,
which is enough for trusted code only.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pwd
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from qa import processes

# Below systemd's dynamic users (61184-65519), in Debian's range for global allocation.
SANDBOX_UIDS = range(61000, 61184)
DEFAULT_LOCK_DIR = Path("/run/lock/warmpool-sandbox-uids")


class NoFreeUid(RuntimeError):
    pass


@dataclass(frozen=True)
class Slot:
    index: int
    uid: int | None  # None: this process's own uid (not root)


class Slots:
    def __init__(self, slots: list[Slot], locks: list[IO[str]]) -> None:
        self.all = tuple(slots)
        self._locks = locks
        self._free: asyncio.Queue[Slot] = asyncio.Queue()
        for slot in slots:
            self._free.put_nowait(slot)

    @classmethod
    def claim(
        cls, count: int, uids: range = SANDBOX_UIDS, lock_dir: Path = DEFAULT_LOCK_DIR
    ) -> Slots:
        if os.geteuid() != 0:
            return cls([Slot(index, None) for index in range(count)], [])
        _private_dir(lock_dir)
        slots: list[Slot] = []
        locks: list[IO[str]] = []
        for uid in uids:
            if len(slots) == count:
                break
            lock = try_lock(lock_dir / f"uid-{uid}.lock")
            if lock is None:
                continue
            if _has_account(uid) or processes.uid_in_use(uid):
                lock.close()
                continue
            slots.append(Slot(len(slots), uid))
            locks.append(lock)
        if len(slots) < count:
            for lock in locks:
                lock.close()
            raise NoFreeUid(
                f"needed {count} free sandbox uids in {uids.start}-{uids.stop - 1}, found "
                f"{len(slots)}: each is taken by a running warmpool, an account or a process"
            )
        return cls(slots, locks)

    @property
    def separate_uids(self) -> bool:
        return all(slot.uid is not None for slot in self.all)

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[Slot]:
        slot = await self._free.get()
        try:
            yield slot
        finally:
            self._free.put_nowait(slot)

    def release(self) -> None:
        for lock in self._locks:
            lock.close()
        self._locks.clear()


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise NoFreeUid(f"{path} must be a folder owned by root that others cannot write to")


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive lock on `path` (created if missing), held until closed; None if taken."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    lock = os.fdopen(descriptor, "r+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
