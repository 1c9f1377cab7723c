"""The batches at the provider: one process at a time gathers the queued batch lines into
batches, submits them, polls them, and stores what each line came to.

A pass (`run_once`, every tick on every worker; an advisory lock lets one run at a time):
- wakes the jobs whose lines have ended, so that they are claimed again;
- polls each submitted batch; once it has ended (completed, expired, failed, cancelled), reads
  its output and error files and stores, per line, the response's body or why it failed and
  whether another line may succeed (a line the batch never ran may; one the API refused as a
  bad request may not), then wakes the line's job;
- submits the queued lines of a model once it has `size` of them or its oldest has waited
  `wait_seconds`: the batch's row and its lines are taken in one statement, then the lines are
  uploaded as a JSONL file and the batch created with the row's id in its metadata. A pass that
  died between the two finds the batch at the provider by that id instead of creating it twice;
  a provider that could not be reached is asked again at the next pass.

Reading batches and files bills nothing; only the lines a batch runs are billed, and each is
settled once, by the job's next attempt (batch_calls.py) or, when its job has ended, as
abandoned (`abandon`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
import msgspec
import openai
from openai.types import Batch
from openai.types.responses import Response

from core.ids import Id
from core.sql import Executor, Queries
from generation.ledger import CallRecord, book_at_ceiling
from generation.openai.background import settle
from generation.openai.prices import Rates

queries = Queries("generation")
log = logging.getLogger(__name__)

UNDER_WAY = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
# The metadata key naming the batch's row, by which a pass finds a batch it created but could
# not record.
ROW_KEY = "warmpool_batch"
_NEVER_SENT = "its job ended before its batch went out"
# Recent batches searched for one of ours that a pass created without recording it.
RECENT_BATCHES = 100


@dataclass
class BatchPass:
    # False: another process was running a pass, and this one did nothing.
    ran: bool
    submitted: list[int] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    woken: list[int] = field(default_factory=list)


class OpenBatch(msgspec.Struct, frozen=True, kw_only=True):
    id: Id
    model: str
    lines: int
    # The provider's id once it holds the batch, and the status it last reported (submitting:
    # not yet created there).
    provider_batch_id: str | None
    status: str
    completed_lines: int
    failed_lines: int
    created_at: datetime


class OpenBatches(msgspec.Struct, frozen=True, kw_only=True):
    """The batch lane at a glance: the batches not yet ended, the lines waiting for a batch to
    go out in, and the jobs waiting for a line."""

    batches: list[OpenBatch]
    queued_lines: int
    waiting_jobs: int


async def open_batches(connection: Executor) -> OpenBatches:
    rows = await connection.fetch(queries["batches_open"])
    waiting = await connection.fetchrow(queries["batch_lines_waiting"])
    assert waiting is not None
    return OpenBatches(
        batches=[OpenBatch(**{**dict(row), "id": Id(row["id"])}) for row in rows],
        queued_lines=waiting["queued_lines"],
        waiting_jobs=waiting["waiting_jobs"],
    )


class LineEnd(msgspec.Struct, frozen=True):
    """What a batch did with one line."""

    custom_id: str
    answer: str | None
    error: str | None
    retryable: bool


class BatchLane:
    def __init__(
        self,
        db: asyncpg.Pool,
        client: openai.AsyncOpenAI,
        *,
        rates: Rates,
        ceiling_usd: Decimal,
        size: int,
        wait_seconds: float,
    ) -> None:
        self._db = db
        self._client = client
        self._rates = rates
        self._ceiling = ceiling_usd
        self._size = size
        self._wait = timedelta(seconds=wait_seconds)

    async def run_once(self, now: datetime | None = None) -> BatchPass:
        async with self._db.acquire() as leader, leader.transaction():
            if not await leader.fetchval(queries["batch_leader_try_lock"]):
                return BatchPass(ran=False)
            done = BatchPass(ran=True)
            done.ended = await self._poll()
            await self._resubmit()
            done.submitted = await self._submit(now)
            done.woken = await self._wake()
            return done

    async def _wake(self) -> list[int]:
        rows = await self._db.fetch(queries["jobs_wake_if_line_ended"])
        if rows:
            await self._db.execute(queries["dispatchers_wake"])
        return [row["id"] for row in rows]

    async def _submit(self, now: datetime | None) -> list[int]:
        submitted: list[int] = []
        while True:
            batch_id = await self._db.fetchval(
                queries["batch_insert_of_due_lines"], self._size, self._wait, now
            )
            if batch_id is None:
                return submitted
            if await self._send(batch_id, input_file_id=None):
                submitted.append(batch_id)
            else:
                return submitted  # the provider cannot be reached now: the rest waits too

    async def _resubmit(self) -> None:
        for row in await self._db.fetch(queries["batches_submitting"]):
            try:
                found = await self._created_before(row["id"])
            except openai.APIError as error:
                log.warning("could not list the provider's batches, asking again later: %s", error)
                return
            if found is not None:
                await self._submitted(row["id"], found)
            elif not await self._send(row["id"], input_file_id=row["input_file_id"]):
                return

    async def _created_before(self, batch_id: int) -> Batch | None:
        """The batch of this row, should an earlier pass have created it without recording it."""
        page = await self._client.batches.list(limit=RECENT_BATCHES)
        for batch in page.data:
            if (batch.metadata or {}).get(ROW_KEY) == str(batch_id):
                return batch
        return None

    async def _send(self, batch_id: int, *, input_file_id: str | None) -> bool:
        """Upload the batch's lines (unless uploaded already) and create the batch; False when
        the provider could not be reached (the batch is sent again at the next pass)."""
        try:
            if input_file_id is None:
                lines = await self._db.fetch(queries["batch_lines_of_batch"], batch_id)
                content = "".join(
                    msgspec.json.encode(
                        {
                            "custom_id": line["custom_id"],
                            "method": "POST",
                            "url": "/v1/responses",
                            "body": line["request"],
                        }
                    ).decode()
                    + "\n"
                    for line in lines
                )
                uploaded = await self._client.files.create(
                    file=(f"warmpool-batch-{batch_id}.jsonl", content.encode()), purpose="batch"
                )
                input_file_id = uploaded.id
                await self._db.execute(queries["batch_file_uploaded"], batch_id, input_file_id)
            created = await self._client.batches.create(
                input_file_id=input_file_id,
                endpoint="/v1/responses",
                completion_window="24h",
                metadata={ROW_KEY: str(batch_id)},
            )
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
            log.warning("batch %s could not be sent, sending it again later: %s", batch_id, e)
            return False
        except openai.APIStatusError as error:
            # Refused as it stands (a bad request): sending it again would be refused again.
            await self._end(
                batch_id,
                status="refused",
                lines=[],
                unanswered=f"the model API refused the batch ({error.status_code}: {error})",
                retryable=False,
            )
            return True
        await self._submitted(batch_id, created)
        return True

    async def _submitted(self, batch_id: int, batch: Batch) -> None:
        await self._db.execute(
            queries["batch_submitted_if_submitting"], batch_id, batch.id, batch.status
        )
        log.info("batch %s went out as %s", batch_id, batch.id, extra={"batch_id": batch_id})

    async def _poll(self) -> list[int]:
        ended: list[int] = []
        for row in await self._db.fetch(queries["batches_submitted"]):
            try:
                batch = await self._client.batches.retrieve(row["provider_batch_id"])
                if batch.status in UNDER_WAY:
                    counts = batch.request_counts
                    await self._db.execute(
                        queries["batch_progress"],
                        row["id"],
                        batch.status,
                        counts.completed if counts else 0,
                        counts.failed if counts else 0,
                    )
                    continue
                lines = [
                    *await self._file_lines(batch.output_file_id),
                    *await self._file_lines(batch.error_file_id),
                ]
            except openai.NotFoundError:
                # The provider no longer holds it (nor its files): its lines are written again.
                lost = f"the model API no longer holds batch {row['provider_batch_id']}"
                await self._end(row["id"], status="lost", lines=[], unanswered=lost, retryable=True)
                ended.append(row["id"])
                continue
            except openai.APIError as error:
                # Reading bills nothing: read it again at the next pass.
                log.warning("could not read batch %s, reading it again later: %s", row["id"], error)
                continue
            await self._end(
                row["id"],
                status=batch.status,
                lines=[_line_end(line) for line in lines],
                unanswered=_unanswered(batch),
                retryable=True,
            )
            ended.append(row["id"])
        return ended

    async def _file_lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if file_id is None:
            return []
        content = await self._client.files.content(file_id)
        return [msgspec.json.decode(text) for text in content.text.splitlines() if text.strip()]

    async def _end(
        self, batch_id: int, *, status: str, lines: list[LineEnd], unanswered: str, retryable: bool
    ) -> None:
        """Store what the batch did with each line, a line it did not name failing with
        `unanswered`, and end the batch, in one transaction."""
        async with self._db.acquire() as connection, connection.transaction():
            named = {line.custom_id: line for line in lines}
            every = [
                named.get(row["custom_id"])
                or LineEnd(row["custom_id"], None, unanswered, retryable)
                for row in await connection.fetch(queries["batch_lines_of_batch"], batch_id)
            ]
            await connection.execute(
                queries["batch_lines_end_if_batched"],
                batch_id,
                [line.custom_id for line in every],
                ["answered" if line.answer is not None else "failed" for line in every],
                [line.answer for line in every],
                [line.error for line in every],
                [line.retryable for line in every],
            )
            answered = sum(1 for line in every if line.answer is not None)
            await connection.execute(
                queries["batch_end_unless_ended"],
                batch_id,
                status,
                answered,
                len(every) - answered,
                None if answered == len(every) else unanswered,
            )
        log.info(
            "batch %s ended %s: %d line(s) answered of %d",
            batch_id,
            status,
            answered,
            len(every),
            extra={"batch_id": batch_id},
        )

    async def abandon(self, custom_id: str) -> CallRecord | None:
        """The call of a line whose job will never read it, as a record to settle: a line not
        yet sent never goes out; one answered costs what it cost. None while its batch is
        under way (it cannot be cancelled alone): it is asked again later."""
        cancelled = await self._db.fetchval(
            queries["batch_line_cancel_if_queued"], custom_id, _NEVER_SENT
        )
        if cancelled is not None:
            return CallRecord(provider_id=custom_id, outcome="unbilled", error=_NEVER_SENT)
        line = await self._db.fetchrow(queries["batch_line_of_custom_id"], custom_id)
        if line is None or line["status"] == "batched":
            return None
        record = CallRecord(provider_id=custom_id)
        if line["answer"] is None:
            record.outcome, record.error = "unbilled", line["error"]
            return record
        settle(Response.model_validate(line["answer"]), record, self._rates)
        record.outcome = "failed"
        record.error = "answered in its batch after its job ended; never used"
        book_at_ceiling(record, self._ceiling)
        return record


def _line_end(line: dict[str, Any]) -> LineEnd:
    """A line of an output or error file, as stored."""
    custom_id = str(line["custom_id"])
    response, error = line.get("response"), line.get("error")
    if response is not None and response.get("status_code") == 200:
        return LineEnd(custom_id, msgspec.json.encode(response["body"]).decode(), None, True)
    if response is not None:
        status = int(response.get("status_code") or 0)
        detail = ((response.get("body") or {}).get("error") or {}).get("message") or "no reason"
        return LineEnd(
            custom_id,
            None,
            f"the model API answered {status} for the line ({detail})",
            status == 429 or status >= 500,
        )
    error = error or {}
    return LineEnd(
        custom_id,
        None,
        f"the batch did not run the line ({error.get('code')}: {error.get('message')})",
        True,
    )


def _unanswered(batch: Batch) -> str:
    """Why a line the batch's files do not name failed."""
    reasons = (
        "; ".join(f"{error.code}: {error.message}" for error in (batch.errors.data or []))
        if batch.errors
        else ""
    )
    return f"the batch ended {batch.status} without answering the line" + (
        f" ({reasons})" if reasons else ""
    )
