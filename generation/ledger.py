"""The spend ledger: every model call is a row under its job's attempt, written before the call.

A call may start only after the database confirms that the job is still generating under
this attempt; a worker that lost its job to the sweeper therefore starts no further call. A
call's spend is always recorded when it ends, even when the job was lost meanwhile (the row
is then marked orphaned), so the ledger is the truth about money. A call that may have billed
with no price to show (no answer, a cancelled request, an answer without usage) is booked at
its ceiling: the budget never takes it for free.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

import asyncpg

from core.sql import Executor, Queries, outlasting_outages
from generation.spend import Spend, spend_of

queries = Queries("generation")

# How long starting a call waits out an outage: nothing is spent yet, so then the job goes back
# to the queue. Recording a call's spend waits longer (outlasting_outages' default).
START_PATIENCE_SECONDS = 30.0

Purpose = Literal["generate", "sabotage"]
Outcome = Literal["ok", "failed", "refused", "malformed", "unbilled"]


class JobLost(Exception):
    """The job is no longer generating under this attempt: another actor won the race."""

    def __init__(self, job_id: int, attempt: int) -> None:
        super().__init__(f"job {job_id} is no longer generating under attempt {attempt}")


@dataclass
class CallRecord:
    """What the provider reports about one call; written to the ledger when the call ends."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    outcome: Outcome | None = None
    error: str | None = None
    # The provider read what the call cost (its token usage).
    priced: bool = False


class Ledger:
    """The model-call gate and spend record for one attempt of one job."""

    def __init__(
        self,
        db: asyncpg.Pool,
        job_id: int,
        attempt: int,
        *,
        start_patience_seconds: float = START_PATIENCE_SECONDS,
    ) -> None:
        self._db = db
        self.job_id = job_id
        self.attempt = attempt
        self._calls = 0
        self._start_patience = start_patience_seconds

    @asynccontextmanager
    async def call(
        self, purpose: Purpose, provider: str, model: str, *, ceiling_usd: Decimal = Decimal(0)
    ) -> AsyncIterator[CallRecord]:
        """One model call, costing at most `ceiling_usd`."""
        self._calls += 1
        start = functools.partial(
            self._db.fetchval,
            queries["llm_call_start_if_generating"],
            self.job_id,
            self.attempt,
            purpose,
            provider,
            model,
            self._calls,
        )
        call_id = await outlasting_outages(
            start,
            what=f"starting call {self._calls} of job {self.job_id}",
            patience_seconds=self._start_patience,
        )
        if call_id is None:
            raise JobLost(self.job_id, self.attempt)
        record = CallRecord()
        try:
            yield record
        except BaseException as error:
            record.outcome = record.outcome or "failed"
            record.error = record.error or _describe(error)
            raise
        finally:
            if ceiling_usd and not record.priced and record.outcome != "unbilled":
                record.cost_usd = ceiling_usd
                note = f"booked at its ceiling of ${ceiling_usd.normalize():f}"
                record.error = f"{record.error}; {note}" if record.error else note
            # Shielded: a job cancelled mid-call (lost, or shutting down) still records its spend.
            await asyncio.shield(self._finish(call_id, record))

    async def _finish(self, call_id: int, record: CallRecord) -> None:
        await outlasting_outages(
            functools.partial(self._record, call_id, record),
            what=f"recording the spend of call {call_id}",
        )

    async def _record(self, call_id: int, record: CallRecord) -> None:
        await self._db.execute(
            queries["llm_call_finish"],
            call_id,
            record.input_tokens,
            record.output_tokens,
            record.cost_usd,
            record.outcome or "ok",
            record.error,
        )


async def spend_by_outcome(connection: Executor) -> dict[str, Spend]:
    """The whole ledger per outcome, 'started' included."""
    rows = await connection.fetch(queries["llm_spend_by_outcome"])
    return {row["outcome"]: spend_of(row) for row in rows}


def _describe(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return "cancelled mid-call"
    return f"{type(error).__name__}: {error}"
