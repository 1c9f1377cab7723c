"""Dispatch: claim pending jobs into the room under the global cap, counted from the table.

Runs in every worker process: on the tick (sweep, then claim) and whenever a NOTIFY or a
freed slot says there may be work (claim). Runs never overlap within a process; across
processes the dispatch lock makes count-then-claim atomic, so the global cap holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

import asyncpg

from core.sql import DATABASE_ERRORS, Queries
from generation.budget import Budget, claim_parameters
from generation.jobs import ClaimedJob
from generation.sweeper import Sweeper
from generation.worker import Worker

queries = Queries("generation")
log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "warmpool_jobs"


class Dispatcher:
    def __init__(
        self,
        db: asyncpg.Pool,
        worker: Worker,
        sweeper: Sweeper,
        *,
        global_cap: int,
        replenish_cap: int,
        budget: Budget | None = None,
        domains: Iterable[str] | None = None,
        count_timeout_seconds: float = 2.0,
        maintenance_timeout_seconds: float = 10.0,
    ) -> None:
        self._db = db
        self.worker = worker
        self._sweeper = sweeper
        self._global_cap = global_cap
        self._replenish_cap = replenish_cap
        self._budget = claim_parameters(budget)
        # The domains this worker can make, the only ones it claims; None: every domain.
        self._domains = None if domains is None else list(domains)
        self._count_timeout = count_timeout_seconds
        # Maintenance runs before a tick's claim; a locked table must not stall dispatch.
        self._maintenance_timeout = maintenance_timeout_seconds
        self._running = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopped = False
        self._sweep_due = False
        self._claim_due = False
        self._claim_unsure = False
        self._background: set[asyncio.Task[None]] = set()

    async def run_once(self, now: datetime | None = None) -> list[ClaimedJob]:
        """One tick: sweep, settle what this worker's dead processes and lost claim answers
        left generating, then claim. Returns the claimed jobs."""
        await self._maintain("sweep", lambda: self._sweeper.run_once(now))
        await self._maintain("reconcile", lambda: self.worker.reconcile(now))
        if await self._maintain("release of unheld jobs", self.worker.release_unheld):
            self._claim_unsure = False
        return await self.claim(now)

    async def _maintain(self, what: str, step: Callable[[], Awaitable[object]]) -> bool:
        try:
            async with asyncio.timeout(self._maintenance_timeout):
                await step()
        except DATABASE_ERRORS as error:  # TimeoutError included
            log.warning("%s failed, will retry next tick: %s", what, error)
            return False
        return True

    async def claim(self, now: datetime | None = None) -> list[ClaimedJob]:
        want = self.worker.free_slots()
        if want <= 0 or self._stopped:
            return []
        if self._claim_unsure and not await self._maintain(
            "release of unheld jobs", self.worker.release_unheld
        ):
            return []
        self._claim_unsure = False
        try:
            rows = await self._db.fetch(
                queries["job_claim_within_cap"],
                want,
                self._global_cap,
                self._replenish_cap,
                self.worker.id,
                now,
                *self._budget,
                self._domains,
                timeout=self._count_timeout,
            )
        except DATABASE_ERRORS as error:
            # Counting in-flight jobs failed (or the claim did): the system counts as full. The
            # claim may have committed with its answer lost: what it claimed goes back first.
            self._claim_unsure = True
            log.warning(
                "claim failed, claiming nothing until the next try: %s",
                error,
                extra={"worker_id": self.worker.id},
            )
            return []
        claimed = [ClaimedJob(**dict(row)) for row in rows]
        for job in claimed:
            log.info(
                "claimed job %s attempt %s (%s lane, %s)",
                job.id,
                job.attempt,
                job.lane,
                job.domain,
                extra={**job.log_fields(), "worker_id": self.worker.id},
            )
            self.worker.start(job)
        return claimed

    async def settled(self) -> None:
        """Once the runs that ticks and wake-ups started have ended."""
        while self._background:
            await asyncio.gather(*self._background)
        await self._idle.wait()

    async def stop(self) -> None:
        """Claim nothing more; return once a claim under way has handed its jobs to the worker."""
        self._stopped = True
        await self._idle.wait()

    async def tick(self) -> None:
        self._sweep_due = True
        await self._run_due()

    def wake(self) -> None:
        self._claim_due = True
        if not self._running and not self._stopped:
            task = asyncio.get_running_loop().create_task(self._run_due())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _run_due(self) -> None:
        # Runs never overlap: a request during a run makes the loop go round once more.
        self._claim_due = True
        if self._running:
            return
        self._running = True
        self._idle.clear()
        try:
            while self._claim_due and not self._stopped:
                self._claim_due = False
                try:
                    if self._sweep_due:
                        self._sweep_due = False
                        await self.run_once()
                    else:
                        await self.claim()
                except Exception:
                    # Not a database error (those are handled where they happen): a bug. The
                    # dispatcher goes on; the next NOTIFY, freed slot or tick runs it again.
                    log.exception("dispatch failed", extra={"worker_id": self.worker.id})
        finally:
            self._running = False
            self._idle.set()
