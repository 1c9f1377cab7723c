"""Calls nobody will use, cancelled at the provider: a background response still under way whose
job has ended (cancelled while it waited in the queue after a release, failed by the sweeper,
deleted), or waits in the queue while the daily budget stops every claim. Each is booked once,
at what the provider reports it cost (its ceiling without a report), as orphaned. A batch line
whose job has ended is settled the same way once its batch has answered it (a line cannot be
cancelled alone), or never goes out if its batch has not. And a call cut off before the
provider named it (its process killed while the request was out), which nobody can find there
again, is booked at its ceiling once its attempt has let the job go."""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

import asyncpg

from core.sql import Queries
from generation import budget as budgets
from generation.budget import Budget
from generation.provider import Abandon

queries = Queries("generation")
log = logging.getLogger(__name__)

# Calls cancelled per pass; the next pass takes the rest.
PER_PASS = 50


class AbandonedCalls:
    def __init__(
        self,
        db: asyncpg.Pool,
        abandon: Abandon,
        *,
        budget: Budget | None,
        abandon_line: Abandon | None = None,
        request_seconds: float,
        call_ceiling_usd: Decimal,
    ) -> None:
        self._db = db
        # Background responses by their id, and batch lines by their custom id.
        self._abandon = {"background": abandon, "batch": abandon_line}
        self._budget = budget
        # A stopped generation waits for its request (at most this long) to store the call's
        # id; a call without one twice as old as that was cut off.
        self._cut_off_after_seconds = 2 * request_seconds
        # The ceiling of a call whose row has none (written by an older release).
        self._call_ceiling = call_ceiling_usd

    async def run_once(self, now: datetime | None = None) -> list[int]:
        """The ids of the calls cancelled and booked, the ones cut off included."""
        return [*await self._cancel_abandoned(now), *await self._book_cut_off(now)]

    async def _book_cut_off(self, now: datetime | None) -> list[int]:
        rows = await self._db.fetch(
            queries["llm_calls_book_cut_off"],
            PER_PASS,
            now,
            self._call_ceiling,
            self._cut_off_after_seconds,
        )
        for row in rows:
            log.warning(
                "call %s of job %s was cut off before the provider named it: booked at its "
                "ceiling, $%s",
                row["id"],
                row["job_id"],
                row["cost_usd"],
                extra={"job_id": row["job_id"]},
            )
        return [row["id"] for row in rows]

    async def _cancel_abandoned(self, now: datetime | None) -> list[int]:
        stopped = (
            self._budget is not None
            and (await budgets.status(self._db, self._budget, now)).exhausted
        )
        rows = await self._db.fetch(queries["llm_calls_open_of_abandoned_jobs"], stopped, PER_PASS)
        settled = []
        for row in rows:
            abandon = self._abandon.get(row["mode"])
            record = None if abandon is None else await abandon(row["provider_id"])
            if record is None:
                continue
            call_id = await self._db.fetchval(
                queries["llm_call_settle_if_abandoned"],
                row["id"],
                record.input_tokens,
                record.output_tokens,
                record.cost_usd,
                record.outcome,
                record.error,
                row["job_attempt"] or 0,
            )
            if call_id is not None:
                settled.append(call_id)
                log.info(
                    "call %s of job %s (response %s): %s",
                    row["id"],
                    row["job_id"],
                    row["provider_id"],
                    record.error,
                    extra={"job_id": row["job_id"]},
                )
        return settled
