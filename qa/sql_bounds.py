"""What one SQL proof may consume, and the watchdog that stops a run past it.

Postgres lets any role raise its own work_mem, statement_timeout or parallel workers with SET
(they are user settings: a role-level value is only a default), so the role's limits are the
first line only. The runner fails a proof that leaves one raised, the wall clock bounds time
whatever the timeout says, and the watchdog polls what a raise or a big table would cost: the
run database's size (unlogged and temporary tables live in its folder too), the private
memory of the run's backend, read from the server's /proc, any parallel worker it starts, and
the locks it holds, which come from one table that the whole server shares (a transaction that
creates thousands of tables fills it, and every other session's next lock fails). Past a bound
it terminates the backend and the proof fails with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg

from core.sql import Executor, Queries

queries = Queries("qa", "watch_queries.sql")

T = TypeVar("T")
MIB = 1024 * 1024

# The role's defaults for the user settings that decide what a statement may take. Parallel
# workers are off: their shared memory is not the backend's own, so the watchdog could not
# count it.
SESSION_LIMITS: dict[str, str] = {
    "work_mem": "4MB",
    "hash_mem_multiplier": "2",
    "maintenance_work_mem": "64MB",
    "temp_buffers": "8MB",
    "max_parallel_workers_per_gather": "0",
    "max_parallel_maintenance_workers": "0",
}
# A superuser setting, which the role cannot lift: its spill files stay bounded.
TEMP_FILE_LIMIT = "64MB"
DATABASE_BYTES = 64 * MIB
MEMORY_BYTES = 256 * MIB
# A proof's transaction locks the relations it touches: tens, for a mission's schema.
LOCKS = 1000
WATCH_INTERVAL_S = 0.1
# pg_terminate_backend waits this long for the backend to be gone.
TERMINATE_WAIT_MS = 5000


class BoundCrossed(Exception):
    """A run took more than a proof may; the message says what and how much."""


class Watchdog:
    """Watches one run: its database `database` and its backend `pid`, through the admin pool.
    `watch_memory` is False where the admin may not read the server's /proc."""

    def __init__(
        self,
        admin: asyncpg.Pool,
        *,
        database: str,
        pid: int,
        watch_memory: bool,
    ) -> None:
        self._admin = admin
        self._database = database
        self._pid = pid
        self._watch_memory = watch_memory

    async def guard(self, work: Coroutine[Any, Any, T]) -> T:
        """`work`'s result, or BoundCrossed once the run is past a bound and its backend gone."""
        task = asyncio.create_task(work)
        # Retrieved however the wait below ends (a second cancel interrupts it): the run's own
        # error means nothing past a bound or a cancel.
        task.add_done_callback(_retrieve)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WATCH_INTERVAL_S)
                if done:
                    return task.result()
                reason = await self.check_once()
                if reason is not None:
                    await self._admin.fetchval(
                        queries["proof_backend_terminate"], self._pid, TERMINATE_WAIT_MS
                    )
                    raise BoundCrossed(reason)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})

    async def check_once(self) -> str | None:
        """Why the run is past a bound now, or None."""
        usage = await self._admin.fetchrow(queries["proof_run_usage"], self._database, self._pid)
        assert usage is not None
        if usage["parallel_workers"]:
            return (
                f"the proof started {usage['parallel_workers']} parallel workers, "
                "which proofs may not use"
            )
        if usage["locks"] > LOCKS:
            return f"the proof held {usage['locks']} locks, past the {LOCKS} {_MAY}"
        size = usage["database_bytes"]
        if size > DATABASE_BYTES:
            return (
                f"the proof database grew to {_mib(size)}, past the {_mib(DATABASE_BYTES)} {_MAY}"
            )
        memory = await backend_memory(self._admin, self._pid) if self._watch_memory else None
        if memory is not None and memory > MEMORY_BYTES:
            return (
                f"the proof's backend held {_mib(memory)} of memory, past the "
                f"{_mib(MEMORY_BYTES)} {_MAY}"
            )
        return None


async def backend_memory(admin: Executor, pid: int) -> int | None:
    """The private memory of backend `pid` in bytes; None where the server has no /proc.
    Raises InsufficientPrivilegeError where the admin may not read the server's files."""
    kilobytes = await admin.fetchval(queries["proof_backend_memory"], pid)
    return None if kilobytes is None else int(kilobytes) * 1024


_MAY = "a proof may use"


def _mib(size: int) -> str:
    return f"{size // MIB} MiB"


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()
