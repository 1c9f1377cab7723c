"""Dispatch: count in-flight generations from the table and claim pending jobs into the room.

Runs in every worker process, on a tick and whenever a NOTIFY or a freed slot says there
may be work. Runs never overlap within a process; across processes the dispatch lock in
`queries.sql` makes count-then-claim atomic, so the global cap holds.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import asyncpg

from core.sql import Connection, Queries
from generation.sweeper import Sweeper
from generation.worker import ClaimedJob, Worker

queries = Queries("generation")
log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "warmpool_jobs"


class _CountFailed(Exception):
    pass


class Dispatcher:
    def __init__(
        self,
        pool: asyncpg.Pool,
        worker: Worker,
        sweeper: Sweeper,
        *,
        global_cap: int,
        replenish_cap: int,
        count_timeout_seconds: float = 2.0,
    ) -> None:
        self._pool = pool
        self._worker = worker
        self._sweeper = sweeper
        self._global_cap = global_cap
        self._replenish_cap = replenish_cap
        self._count_timeout = f"{max(1, int(count_timeout_seconds * 1000))}ms"
        self._running = False
        self._again = False

    async def run_once(self, now: datetime | None = None) -> list[ClaimedJob]:
        """Sweep, then claim what fits and hand it to the worker. Returns the claimed jobs."""
        try:
            await self._sweeper.run_once(now)
        except (asyncpg.PostgresError, OSError) as error:
            log.warning("sweep failed, will retry next tick: %s", error)
        want = self._worker.free_slots()
        if want <= 0:
            return []
        try:
            claimed = await self._claim(want, now)
        except _CountFailed:
            return []
        for job in claimed:
            self._worker.start(job)
        return claimed

    async def _claim(self, want: int, now: datetime | None) -> list[ClaimedJob]:
        async with self._pool.acquire() as connection:
            try:
                async with connection.transaction():
                    await connection.execute(queries["dispatch_lock"])
                    counts = await self._count(connection)
                    free = min(want, self._global_cap - counts["total"])
                    replenish_free = min(free, self._replenish_cap - counts["replenish"])
                    if free <= 0:
                        return []
                    rows = await connection.fetch(
                        queries["job_claim_pending"],
                        free,
                        max(0, replenish_free),
                        self._worker.id,
                        now,
                    )
            except (asyncpg.PostgresError, OSError) as error:
                log.warning("claim failed, will retry next tick: %s", error)
                return []
        return [ClaimedJob(**dict(row)) for row in rows]

    async def _count(self, connection: Connection) -> asyncpg.Record:
        # If the count cannot be had, the system counts as full: claiming blind could pass the cap.
        try:
            await connection.execute(queries["statement_timeout_local"], self._count_timeout)
            counts = await connection.fetchrow(queries["jobs_count_generating"])
            await connection.execute(queries["statement_timeout_local"], "0")
        except (asyncpg.PostgresError, OSError) as error:
            log.error(  # noqa: TRY400 (an expected outage, not a bug: no traceback)
                "counting in-flight generations failed; claiming nothing: %s", error
            )
            raise _CountFailed from error
        assert counts is not None
        return counts

    async def run_guarded(self) -> None:
        """Run now, or once more right after the run in progress: runs never overlap."""
        self._again = True
        if self._running:
            return
        self._running = True
        try:
            while self._again:
                self._again = False
                await self.run_once()
        finally:
            self._running = False

    def wake(self) -> None:
        if self._running:
            self._again = True
        else:
            asyncio.get_running_loop().create_task(self.run_guarded())
