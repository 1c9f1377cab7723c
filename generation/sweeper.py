"""The sweeper: frees the slots of dead or stuck generations and expires jobs nobody will run.

A dead generation whose model call the provider may still hold goes back to the queue instead,
so that its next attempt takes the call over rather than paying for it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg

from core.sql import Queries
from generation.metrics import QueueMetrics

queries = Queries("generation")
log = logging.getLogger(__name__)

# A dead generation with a call to take over goes back to the queue only until its attempt
# reaches this: a job that kills every worker that runs it ends failed.
REQUEUE_ATTEMPTS_BELOW = 5


@dataclass(frozen=True)
class Swept:
    stale: list[int]
    expired: list[int]
    requeued: list[int] = field(default_factory=list)


class Sweeper:
    def __init__(
        self,
        db: asyncpg.Pool,
        *,
        heartbeat_timeout: timedelta,
        stuck_after: timedelta,
        pending_expiry: timedelta,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self._db = db
        self._metrics = metrics
        self._heartbeat_timeout = heartbeat_timeout
        self._stuck_after = stuck_after
        self._pending_expiry = pending_expiry

    async def run_once(self, now: datetime | None = None) -> Swept:
        now = now or await self._db.fetchval(queries["sweep_moment"])
        requeued = await self._db.fetch(
            queries["jobs_requeue_if_stale_with_open_call"],
            self._heartbeat_timeout,
            self._stuck_after,
            now,
            REQUEUE_ATTEMPTS_BELOW,
        )
        for row in requeued:
            log.warning(
                "job %s went back to the queue as attempt %s: its worker stopped heartbeating, "
                "and its model call goes on at the provider",
                row["id"],
                row["attempt"],
                extra={"job_id": row["id"], "attempt": row["attempt"]},
            )
        self._count("requeued", requeued)
        stale = await self._db.fetch(
            queries["jobs_fail_if_stale"],
            self._heartbeat_timeout,
            self._stuck_after,
            now,
        )
        for row in stale:
            log.warning(
                "swept job %s attempt %s: %s",
                row["id"],
                row["attempt"],
                row["error"],
                extra={
                    "job_id": row["id"],
                    "attempt": row["attempt"],
                    "worker_id": row["worker_id"],
                },
            )
        self._count("stale", stale)
        expired = await self._db.fetch(
            queries["jobs_fail_if_pending_expired"],
            self._pending_expiry,
            now,
        )
        for row in expired:
            log.warning(
                "expired pending job %s after %s",
                row["id"],
                self._pending_expiry,
                extra={"job_id": row["id"]},
            )
        self._count("expired", expired)
        return Swept(
            stale=[row["id"] for row in stale],
            expired=[row["id"] for row in expired],
            requeued=[row["id"] for row in requeued],
        )

    def _count(self, reason: str, swept: list[asyncpg.Record]) -> None:
        if self._metrics is not None:
            self._metrics.swept_jobs.labels(reason).inc(len(swept))
