"""Retention: finished jobs and idempotency keys past their age are deleted in small batches,
and so are the rows of workers silent as long, and the batch lines (requests and answers) of
batches that ended as long ago, with their batches.

Ledger rows stay: spend outlives the jobs it was spent on.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import asyncpg

from core import idempotency
from core.sql import Queries

queries = Queries("generation")
log = logging.getLogger(__name__)

BATCH = 500


class Retention:
    def __init__(self, db: asyncpg.Pool, *, keep_for: timedelta) -> None:
        self._db = db
        self._keep_for = keep_for

    async def run_once(self, now: datetime | None = None) -> int:
        """The finished jobs deleted."""
        cutoff = (now or datetime.now(UTC)) - self._keep_for
        deleted = await self._in_batches(queries["jobs_delete_finished_before"], cutoff)
        await self._in_batches(queries["batch_lines_delete_ended_before"], cutoff)
        await self._db.execute(queries["batches_delete_emptied_before"], cutoff)
        await idempotency.forget_before(self._db, cutoff)
        await self._db.execute(queries["workers_delete_silent_before"], cutoff)
        if deleted:
            log.info("deleted %d finished jobs older than %s", deleted, self._keep_for)
        return deleted

    async def _in_batches(self, query: str, cutoff: datetime) -> int:
        deleted = 0
        while True:
            status = await self._db.execute(query, cutoff, BATCH)
            batch = int(status.split()[-1])
            deleted += batch
            if batch < BATCH:
                return deleted
