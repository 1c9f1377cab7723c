"""The final transition of jobs, in batches: jobs that end while one final transaction runs
share the next one, so a busy worker pays a few round trips per batch, not per job."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import asyncpg
import msgspec

from core.sql import DATABASE_ERRORS, OUTAGE_ERRORS, Connection, Queries, outlasting_outages
from generation.claims import fenced
from generation.jobs import ClaimedJob

queries = Queries("generation")
log = logging.getLogger(__name__)


class Finished(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["completed", "awaiting_review"]
    mission_id: int | None = None
    instance_id: int | None = None


class Failed(msgspec.Struct, frozen=True):
    error: str


# What a generation must write in the job's final transaction (storing its mission, say).
# It runs only while that transaction holds the job as generating under its attempt, so a
# worker that lost its job writes nothing.
Store = Callable[[Connection], Awaitable[Finished | Failed]]


Ending = Finished | Store | Failed

# Times a batch is written after the database rolled it back (a deadlock, say) before its
# waiters hear of the error.
ROLLBACK_TRIES = 5


def _future() -> asyncio.Future[bool]:
    future = asyncio.get_running_loop().create_future()
    # A waiter that gave up (its worker released the job) no longer reads the answer.
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


@dataclass
class _Pending:
    job: ClaimedJob
    ending: Ending
    done: asyncio.Future[bool] = field(default_factory=_future)


class Finisher:
    def __init__(self, db: asyncpg.Pool) -> None:
        self._db = db
        self._waiting: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    async def finish(self, job: ClaimedJob, ending: Ending) -> bool:
        """Record how `job` ended; False when it was no longer this attempt's to end."""
        pending = _Pending(job, ending)
        self._waiting.append(pending)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_while_waiting())
        return await asyncio.shield(pending.done)

    async def _flush_while_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                ended = await self._flush(batch)
            except asyncio.CancelledError:
                for pending in [*batch, *self._waiting]:
                    pending.done.cancel()
                raise
            except Exception as error:
                # Whatever went wrong (a long outage, a driver fault), every waiter hears of it:
                # an unanswered one would keep its job generating under a live worker.
                if not isinstance(error, DATABASE_ERRORS):
                    log.exception("ending %d job(s) failed", len(batch))
                for pending in batch:
                    pending.done.set_exception(error)
                continue
            for pending in batch:
                pending.done.set_result(pending.job.id in ended)

    async def _flush(self, batch: list[_Pending]) -> set[int]:
        """Write the batch's ends, again after an outage; the ids of the jobs whose end is
        recorded. Jobs that the sweeper failed meanwhile are simply no longer held."""
        tries = 0

        async def write() -> set[int]:
            nonlocal tries
            rollbacks = 0
            while True:
                tries += 1
                try:
                    return await self._write(batch, first_try=tries == 1)
                except asyncpg.TransactionRollbackError as error:
                    # Two batches storing the same missions in opposite orders deadlock: this
                    # one rolled back whole, which lets the other finish, and is written again.
                    rollbacks += 1
                    if rollbacks == ROLLBACK_TRIES:
                        raise
                    log.warning("ending %d job(s) rolled back, again: %s", len(batch), error)

        return await outlasting_outages(write, what=f"ending {len(batch)} job(s)")

    async def _write(self, batch: list[_Pending], *, first_try: bool) -> set[int]:
        if first_try and not any(callable(pending.ending) for pending in batch):
            # Nothing to store: the conditional UPDATE alone is the fenced transition.
            rows = [_ended_row(p.job, p.ending) for p in batch if not callable(p.ending)]
            finished = await self._db.fetch(
                queries["jobs_finish_if_generating"], *zip(*rows, strict=True)
            )
            ended = {row["id"] for row in finished}
            rows = [row for row in rows if row[0] in ended]
        else:
            rows, ended = await self._store_and_finish(batch)
        jobs = {pending.job.id: pending.job for pending in batch}
        for job_id, _, status, error, _, _ in rows:
            job = jobs[job_id]
            log.info(
                "job %s attempt %s %s%s",
                job.id,
                job.attempt,
                status,
                f": {error}" if error else "",
                extra={**job.log_fields(), "status": status},
            )
        return ended

    async def _store_and_finish(self, batch: list[_Pending]) -> tuple[list[FinalRow], set[int]]:
        async with self._db.acquire() as connection, connection.transaction():
            locked = await connection.fetch(
                queries["jobs_lock_under_attempt"], *fenced([pending.job for pending in batch])
            )
            held = {row["id"] for row in locked if row["status"] == "generating"}
            # Only this attempt's own final transaction makes these: an earlier try whose
            # commit was acknowledged to nobody (the connection broke at that moment).
            ended_before = {
                row["id"] for row in locked if row["status"] in ("completed", "awaiting_review")
            }
            rows = [
                await _final_row(connection, p.job, p.ending) for p in batch if p.job.id in held
            ]
            if rows:
                await connection.execute(
                    queries["jobs_finish_if_generating"], *zip(*rows, strict=True)
                )
        return rows, held | ended_before


# id, attempt, status, error, mission id, instance id: a row of jobs_finish_if_generating.
FinalRow = tuple[int, int, str, str | None, int | None, int | None]


async def _final_row(connection: Connection, job: ClaimedJob, ending: Ending) -> FinalRow:
    if callable(ending):
        try:
            async with connection.transaction():  # a savepoint: one failed store spares the batch
                ending = await ending(connection)
        except OUTAGE_ERRORS:
            raise  # the connection broke, not the store: the batch is written again on a new one
        except asyncpg.TransactionRollbackError:
            raise  # a savepoint cannot undo the batch's earlier stores that the deadlock holds
        except Exception as error:
            log.exception(
                "storing the result of job %s attempt %s failed",
                job.id,
                job.attempt,
                extra=job.log_fields(),
            )
            ending = Failed(f"storing the result failed: {type(error).__name__}: {error}")
    return _ended_row(job, ending)


def _ended_row(job: ClaimedJob, ending: Finished | Failed) -> FinalRow:
    if isinstance(ending, Failed):
        return (job.id, job.attempt, "failed", ending.error, None, None)
    return (job.id, job.attempt, ending.status, None, ending.mission_id, ending.instance_id)
