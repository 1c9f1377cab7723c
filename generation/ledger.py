"""The spend ledger: every model call is a row under its job's attempt, written before the call.

A call may start only after the database confirms that the job is still generating under
this attempt; a worker that lost its job to the sweeper therefore starts no further call. A
call's spend is always recorded when it ends, even when the job was lost meanwhile (the row
is then marked orphaned), so the ledger is the truth about money. A call that may have billed
with no price to show (no answer, a cancelled request, an answer without usage) is booked at
its ceiling: the budget never takes it for free.

A call the provider names (a background response's id) outlives the attempt that made it: its
id is stored on its row at once, and until the call has ended at the provider, an attempt that
stops waiting for it (released, lost, cut off by an outage) leaves it open. The attempt that
holds the job next takes it over (`take_over`) instead of paying for it again, and only the
attempt holding it may settle it, once.

A call may also go out as a line of a batch (`batched`): its row names the line's custom id,
and the line, with the request it sends, is a row of its own until the batch answers it. The
job's next attempt takes the call over as any other and settles it from the stored answer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal

import asyncpg
import msgspec

from core.sql import DATABASE_ERRORS, Executor, Queries, outlasting_outages
from generation.jobs import Lane
from generation.spend import Spend, spend_of

queries = Queries("generation")
log = logging.getLogger(__name__)

# How long starting a call waits out an outage: nothing is spent yet, so then the job goes back
# to the queue. Recording a call's spend waits longer (outlasting_outages' default).
START_PATIENCE_SECONDS = 30.0
# How long at most the next attempt waits for a live process to store the id of a call it was
# still creating when it gave the job back: longer than a request may take (120 s by default,
# WARMPOOL_OPENAI_TIMEOUT_SECONDS), the wait ending as soon as the call is named or its process
# dies; polling this often.
NAMING_PATIENCE_SECONDS = 300.0
NAMING_POLL_SECONDS = 0.1
PROCESS_SILENT_AFTER = timedelta(seconds=30)

Purpose = Literal["generate", "sabotage"]
Outcome = Literal["ok", "failed", "refused", "malformed", "unbilled"]
# How a call went out: a request answered on its connection, a background response polled by
# its id, or a line of a batch.
Mode = Literal["direct", "background", "batch"]
MODES: tuple[Mode, ...] = ("direct", "background", "batch")


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
    # The provider's name for the call, once `Ledger.submitted` stored it.
    provider_id: str | None = None
    call_id: int = 0


def book_at_ceiling(record: CallRecord, ceiling_usd: Decimal) -> None:
    """A call that may have billed with no price to show costs its ceiling."""
    if ceiling_usd and not record.priced and record.outcome != "unbilled":
        record.cost_usd = ceiling_usd
        note = f"booked at its ceiling of ${ceiling_usd.normalize():f}"
        record.error = f"{record.error}; {note}" if record.error else note


@dataclass(frozen=True)
class OpenCall:
    """An earlier attempt's call that this attempt took over."""

    call_id: int
    provider_id: str
    # Its answer is booked already (a usable one): reading it again settles nothing.
    settled: bool
    started_at: datetime
    mode: Mode


@dataclass(frozen=True)
class BatchLine:
    """A batch line of a call, as the batch left it."""

    status: Literal["queued", "batched", "answered", "failed"]
    # answered: the response's body; failed: why, and whether another line may succeed.
    answer: dict[str, object] | None
    error: str | None
    retryable: bool
    # The lines of the same job, purpose and try that failed, this one included.
    failures: int

    @property
    def under_way(self) -> bool:
        return self.status in ("queued", "batched")


class Ledger:
    """The model-call gate and spend record for one attempt of one job."""

    def __init__(
        self,
        db: asyncpg.Pool,
        job_id: int,
        attempt: int,
        *,
        lane: Lane = "interactive",
        start_patience_seconds: float = START_PATIENCE_SECONDS,
        process_silent_after: timedelta = PROCESS_SILENT_AFTER,
    ) -> None:
        self._db = db
        # A process whose worker has not beaten for this long is dead: its call is not waited
        # for (take_over).
        self._process_silent_after = process_silent_after
        self.job_id = job_id
        self.attempt = attempt
        # The job's lane: only the replenish lane's calls may wait for a batch.
        self.lane = lane
        self._calls = 0
        self._start_patience = start_patience_seconds

    @asynccontextmanager
    async def call(
        self,
        purpose: Purpose,
        provider: str,
        model: str,
        *,
        ceiling_usd: Decimal = Decimal(0),
        mode: Mode = "direct",
        try_number: int = 1,
    ) -> AsyncIterator[CallRecord]:
        """One model call, costing at most `ceiling_usd`; `try_number` names it within its
        purpose (the sabotage try), as a later attempt looks it up."""
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
            mode,
            try_number,
            ceiling_usd,
        )
        call_id = await outlasting_outages(
            start,
            what=f"starting call {self._calls} of job {self.job_id}",
            patience_seconds=self._start_patience,
        )
        if call_id is None:
            raise JobLost(self.job_id, self.attempt)
        async with self._settling(CallRecord(call_id=call_id), ceiling_usd) as record:
            yield record

    async def submitted(self, record: CallRecord, provider_id: str) -> None:
        """Store the provider's id of the call under way before waiting for its answer. Raises
        the outage's error when it could not be stored: then nobody can find the call again,
        and it is booked as a call without an id."""
        await self._name(
            record,
            provider_id,
            functools.partial(
                self._db.execute, queries["llm_call_submitted"], record.call_id, provider_id
            ),
        )

    async def batched(
        self, record: CallRecord, custom_id: str, model: str, request: dict[str, object]
    ) -> None:
        """Write the call as a line of a batch, `custom_id` its provider id, sending `request`
        to the batch's endpoint; raises as `submitted` does."""
        await self._name(
            record,
            custom_id,
            functools.partial(
                self._db.execute,
                queries["llm_call_batched"],
                record.call_id,
                custom_id,
                self.job_id,
                model,
                request,
            ),
        )

    async def batch_line(self, call: OpenCall) -> BatchLine:
        """The batch line of a call taken over, as the batch left it."""
        row = await outlasting_outages(
            functools.partial(self._db.fetchrow, queries["batch_line_of_call"], call.call_id),
            what=f"reading the batch line of call {call.call_id}",
            patience_seconds=self._start_patience,
        )
        assert row is not None, f"call {call.call_id} of mode batch has no line"
        return BatchLine(
            status=row["status"],
            answer=row["answer"],
            error=row["error"],
            retryable=row["retryable"],
            failures=row["failures"],
        )

    async def _name(
        self, record: CallRecord, provider_id: str, write: Callable[[], Awaitable[object]]
    ) -> None:
        record.provider_id = provider_id
        store = asyncio.ensure_future(
            outlasting_outages(write, what=f"storing the provider's id of call {record.call_id}")
        )
        store.add_done_callback(functools.partial(_log_unstored, record.call_id))
        try:
            # Shielded: a generation stopped meanwhile (released at a deploy) leaves the call
            # open for the next attempt, which finds it by this id once it is stored.
            await asyncio.shield(store)
        except DATABASE_ERRORS:
            record.provider_id = None
            raise

    async def take_over(self, purpose: Purpose, try_number: int) -> OpenCall | None:
        """An earlier attempt's call of this purpose and try that the provider may still hold,
        now this attempt's; None when there is none, or when this attempt no longer holds the
        job (its next call then raises JobLost)."""
        deadline = time.monotonic() + NAMING_PATIENCE_SECONDS
        while (row := await self._taken_over(purpose, try_number)) is None:
            if time.monotonic() > deadline or not await self._being_named(purpose, try_number):
                return None
            await asyncio.sleep(NAMING_POLL_SECONDS)
        return OpenCall(
            call_id=row["id"],
            provider_id=row["provider_id"],
            settled=row["outcome"] == "ok",
            started_at=row["started_at"],
            mode=row["mode"],
        )

    async def _taken_over(self, purpose: Purpose, try_number: int) -> asyncpg.Record | None:
        row: asyncpg.Record | None = await outlasting_outages(
            functools.partial(
                self._db.fetchrow,
                queries["llm_call_take_over_if_generating"],
                self.job_id,
                self.attempt,
                purpose,
                try_number,
            ),
            what=f"looking for job {self.job_id}'s open {purpose} call",
            patience_seconds=self._start_patience,
        )
        return row

    async def _being_named(self, purpose: Purpose, try_number: int) -> bool:
        if self.attempt == 1:
            return False  # no earlier attempt made a call
        named: bool = await outlasting_outages(
            functools.partial(
                self._db.fetchval,
                queries["llm_call_being_named"],
                self.job_id,
                self.attempt,
                purpose,
                try_number,
                self._process_silent_after,
            ),
            what=f"looking for job {self.job_id}'s {purpose} call being named",
            patience_seconds=self._start_patience,
        )
        return named

    @asynccontextmanager
    async def resumed(
        self, call: OpenCall, *, ceiling_usd: Decimal = Decimal(0)
    ) -> AsyncIterator[CallRecord]:
        """Waiting for a call taken over; settled as `call` settles, unless it was already."""
        record = CallRecord(call_id=call.call_id, provider_id=call.provider_id)
        if call.settled:
            yield record
            return
        async with self._settling(record, ceiling_usd) as settling:
            yield settling

    async def dropped(self, call: OpenCall, *, ceiling_usd: Decimal, error: str) -> None:
        """The provider no longer holds a call taken over: no takeover after all, and a call
        still open is booked as lost."""
        lost = CallRecord(outcome="failed", error=error)
        book_at_ceiling(lost, ceiling_usd)
        await outlasting_outages(
            functools.partial(
                self._db.execute,
                queries["llm_call_dropped_if_held"],
                call.call_id,
                self.attempt,
                lost.cost_usd,
                lost.error,
            ),
            what=f"booking call {call.call_id} as dropped",
        )

    @asynccontextmanager
    async def _settling(
        self, record: CallRecord, ceiling_usd: Decimal
    ) -> AsyncIterator[CallRecord]:
        try:
            yield record
            record.outcome = record.outcome or "ok"
        except BaseException as error:
            if record.provider_id is not None and record.outcome is None:
                # Still under way at the provider: left open for whoever holds the job next.
                raise
            record.outcome = record.outcome or "failed"
            record.error = record.error or _describe(error)
            raise
        finally:
            if record.provider_id is None or record.outcome is not None:
                book_at_ceiling(record, ceiling_usd)
                # Shielded: a job cancelled mid-call (lost, or shutting down) still records
                # its spend.
                await asyncio.shield(self._finish(record))

    async def _finish(self, record: CallRecord) -> None:
        await outlasting_outages(
            functools.partial(self._record, record),
            what=f"recording the spend of call {record.call_id}",
        )

    async def _record(self, record: CallRecord) -> None:
        values = (
            record.call_id,
            record.input_tokens,
            record.output_tokens,
            record.cost_usd,
            record.outcome or "ok",
            record.error,
        )
        if record.provider_id is None:
            await self._db.execute(queries["llm_call_finish"], *values)
            return
        settled = await self._db.fetchval(queries["llm_call_settle_if_held"], *values, self.attempt)
        if settled is None:
            log.warning(
                "call %s of job %s ended, but attempt %s no longer holds it: left to the "
                "job's next holder",
                record.call_id,
                self.job_id,
                self.attempt,
                extra={"job_id": self.job_id, "attempt": self.attempt},
            )


class SpendByMode(msgspec.Struct, frozen=True, kw_only=True):
    """The whole ledger by how its calls went out, and what taking calls over and batching
    them saved."""

    modes: dict[str, Spend]
    # Calls the next attempt of their job took over instead of paying again, and what paying
    # them again would have cost.
    resumed_calls: int
    saved_by_resumed_usd: float
    # What the calls that went through a batch would have cost at the synchronous price, less
    # what they cost.
    saved_by_batch_usd: float


@dataclass(frozen=True)
class LedgerTotals:
    # The whole ledger per outcome, 'started' included, and per mode.
    by_outcome: dict[str, Spend]
    by_mode: dict[str, Spend]
    # The calls that went through a batch, per model.
    batched_by_model: dict[str, Spend]


async def totals(connection: Executor) -> LedgerTotals:
    rows = await connection.fetch(queries["llm_spend_by_outcome_and_mode"])
    batched = await connection.fetch(queries["llm_spend_of_batches_by_model"])
    return LedgerTotals(
        by_outcome=_summed(rows, "outcome"),
        by_mode=_summed(rows, "mode"),
        batched_by_model=_summed(batched, "model"),
    )


async def cost_by_domain(connection: Executor, domains: list[str]) -> dict[str, float]:
    """What the model calls of each domain's jobs cost, in USD, ever."""
    rows = await connection.fetch(queries["llm_spend_by_domain"], domains)
    return {row["domain"]: float(row["cost_usd"]) for row in rows}


def spend_by_mode(totals: LedgerTotals, *, saved_by_batch_usd: float) -> SpendByMode:
    modes = totals.by_mode
    return SpendByMode(
        modes=modes,
        resumed_calls=sum(spent.resumed_calls for spent in modes.values()),
        saved_by_resumed_usd=sum(spent.saved_usd for spent in modes.values()),
        saved_by_batch_usd=saved_by_batch_usd,
    )


def _summed(rows: list[asyncpg.Record], key: str) -> dict[str, Spend]:
    summed: dict[str, Spend] = {}
    for row in rows:
        spent = spend_of(row)
        before = summed.get(row[key])
        summed[row[key]] = spent if before is None else before + spent
    return summed


def _log_unstored(call_id: int, store: asyncio.Future[object]) -> None:
    if not store.cancelled() and store.exception() is not None:
        log.error(
            "the provider's id of call %s could not be stored: %s", call_id, store.exception()
        )


def _describe(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return "cancelled mid-call"
    return f"{type(error).__name__}: {error}"
