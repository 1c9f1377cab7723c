"""Running claimed jobs in this process: the in-process seatbelt, the generator call,
heartbeats, and reconciling what a crashed process left behind."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import asyncpg

from core.sql import DATABASE_ERRORS, Queries
from generation.finisher import Ending, Failed, Finisher
from generation.jobs import ClaimedJob
from generation.ledger import JobLost, Ledger

queries = Queries("generation")
log = logging.getLogger(__name__)

# At a stop, how long a generation that has ended may take to write its end (a transaction,
# waited out through a short outage) before it is stopped too; the sweeper settles the rest.
FINISHING_SECONDS = 10


class GenerationFailed(Exception):
    """A generation ended without a usable result; the message is shown on the job."""


class Generator(Protocol):
    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Ending:
        """Produce the job's result: `Finished`, or a `Store` to run in its final transaction."""
        ...


class Worker:
    """Runs claimed jobs in this process, at most `capacity` at once.

    The dispatcher never claims more than `free_slots()`, and the global cap is enforced in
    the database; the semaphore is the hard seatbelt should either ever be wrong.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        generator: Generator,
        *,
        name: str,
        capacity: int,
        on_slot_freed: Callable[[], None] = lambda: None,
    ) -> None:
        self._pool = pool
        self._generator = generator
        self.id = f"{name}:{os.getpid()}"
        self.name = name
        self.capacity = capacity
        self._slots = asyncio.Semaphore(capacity)
        self._running: dict[int, tuple[ClaimedJob, asyncio.Task[None]]] = {}
        # Jobs whose generation has ended and whose final transition is being written.
        self._finishing: set[int] = set()
        self._finisher = Finisher(pool)
        self._on_slot_freed = on_slot_freed

    def free_slots(self) -> int:
        return self.capacity - len(self._running)

    def running(self) -> list[ClaimedJob]:
        return [job for job, _ in self._running.values()]

    def start(self, job: ClaimedJob) -> None:
        task = asyncio.create_task(self._run(job), name=f"job-{job.id}-attempt-{job.attempt}")
        self._running[job.id] = (job, task)

    async def _run(self, job: ClaimedJob) -> None:
        try:
            async with self._slots:
                ending = await self._generate(job)
                if ending is not None:
                    self._finishing.add(job.id)
                    if not await self._finisher.finish(job, ending):
                        _log_lost_race(job, "its final transition")
        except asyncio.CancelledError:
            log.info(
                "job %s attempt %s stopped in this process",
                job.id,
                job.attempt,
                extra=self._fields(job),
            )
            raise
        except DATABASE_ERRORS as error:
            log.error(  # noqa: TRY400 (an outage, not a bug; the sweeper will fail the job)
                "job %s attempt %s: could not record its end: %s",
                job.id,
                job.attempt,
                error,
                extra=self._fields(job),
            )
        finally:
            del self._running[job.id]
            self._finishing.discard(job.id)
            self._on_slot_freed()

    async def _generate(self, job: ClaimedJob) -> Ending | None:
        try:
            return await self._generator.generate(job, Ledger(self._pool, job.id, job.attempt))
        except JobLost:
            _log_lost_race(job, "a model call")
            return None
        except GenerationFailed as error:
            log.info(
                "job %s attempt %s failed: %s", job.id, job.attempt, error, extra=self._fields(job)
            )
            return Failed(str(error))
        except Exception as error:
            log.exception("job %s attempt %s crashed", job.id, job.attempt, extra=self._fields(job))
            return Failed(f"generation crashed: {type(error).__name__}: {error}")

    def _fields(self, job: ClaimedJob) -> dict[str, object]:
        return {**job.log_fields(), "worker_id": self.id}

    async def heartbeat_once(self, now: datetime | None = None) -> list[ClaimedJob]:
        """Heartbeat every held job; stop and return those this worker no longer holds."""
        held = self.running()
        if not held:
            return []
        alive = {
            row["id"]
            for row in await self._pool.fetch(
                queries["jobs_heartbeat_if_generating"],
                [job.id for job in held],
                [job.attempt for job in held],
                now,
            )
        }
        lost = [job for job in held if job.id not in alive]
        for job in lost:
            _log_lost_race(job, "a heartbeat")
            entry = self._running.get(job.id)
            if entry is not None and entry[0].attempt == job.attempt:
                entry[1].cancel()
        return lost

    async def reconcile(self) -> list[int]:
        """At start: fail the jobs that earlier, now dead, processes on this machine held."""
        candidates = await self._pool.fetch(queries["workers_generating_on_host"], self.name)
        dead = [row["worker_id"] for row in candidates if not _process_alive(row["worker_id"])]
        if not dead:
            return []
        rows = await self._pool.fetch(queries["jobs_fail_if_owned_by_dead_process"], dead)
        for row in rows:
            log.warning(
                "job %s attempt %s failed: its worker %s died",
                row["id"],
                row["attempt"],
                row["worker_id"],
                extra={
                    "job_id": row["id"],
                    "attempt": row["attempt"],
                    "worker_id": row["worker_id"],
                },
            )
        return [row["id"] for row in rows]

    async def drain(self, grace_seconds: float | None) -> bool:
        """Wait for the generations under way to end; True when none is left."""
        tasks = [task for _, task in self._running.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace_seconds)
        return not self._running

    async def release(self) -> list[int]:
        """Give the generations still under way back to the queue, each as pending under a new
        attempt, and stop them. Released first, so a stopped generation writes nothing more
        than its model call under way, recorded in the ledger as orphaned. A generation that
        has ended is not released but given a moment to write its end: its result is paid for."""
        held = [job for job in self.running() if job.id not in self._finishing]
        released = await self._release(held) if held else []
        for job_id in released:
            if (entry := self._running.get(job_id)) is not None:
                entry[1].cancel()
        finishing = [
            task for job_id, (_, task) in self._running.items() if job_id in self._finishing
        ]
        if finishing:
            await asyncio.wait(finishing, timeout=FINISHING_SECONDS)
        await self.stop()
        return released

    async def _release(self, held: list[ClaimedJob]) -> list[int]:
        try:
            rows = await self._pool.fetch(
                queries["jobs_release_if_generating"],
                [job.id for job in held],
                [job.attempt for job in held],
            )
        except DATABASE_ERRORS as error:
            log.error(  # noqa: TRY400 (an outage, not a bug)
                "could not release %d job(s) back to the queue, the sweeper will fail them: %s",
                len(held),
                error,
                extra={"worker_id": self.id},
            )
            return []
        by_id = {job.id: job for job in held}
        for row in rows:
            job = by_id[row["id"]]
            log.info(
                "released job %s attempt %s back to the queue, as attempt %s",
                job.id,
                job.attempt,
                row["attempt"],
                extra=self._fields(job),
            )
        return [row["id"] for row in rows]

    async def stop(self) -> None:
        tasks = [task for _, task in self._running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _process_alive(worker_id: str) -> bool:
    pid_text = worker_id.rpartition(":")[2]
    if not pid_text.isdigit():
        return True  # not ours to judge; the sweeper will
    pid = int(pid_text)
    if pid == os.getpid():
        return False  # we have just started: nothing is ours yet
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _log_lost_race(job: ClaimedJob, step: str) -> None:
    log.warning(
        "job %s attempt %s lost its claim before %s (swept or released); nothing written",
        job.id,
        job.attempt,
        step,
        extra=job.log_fields(),
    )
