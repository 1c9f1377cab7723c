"""Running claimed jobs: the in-process seatbelt, heartbeats, and the fenced final transition."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Literal, Protocol

import asyncpg
import msgspec

from core.sql import Connection, Queries
from generation.ledger import JobLost, Ledger
from generation.queue import Lane

queries = Queries("generation")
log = logging.getLogger(__name__)


class ClaimedJob(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    attempt: int
    lane: Lane
    user_id: str | None
    track: str | None
    domain: str
    created_at: datetime


class Finished(msgspec.Struct, frozen=True, kw_only=True):
    status: Literal["completed", "awaiting_review"]
    mission_id: int | None = None
    instance_id: int | None = None


# Stores what a generation produced, inside the job's final transaction: it runs only while
# that transaction holds the job as generating under its attempt.
Completion = Callable[[Connection], Awaitable[Finished]]


class GenerationFailed(Exception):
    """A generation ended without a usable result; the message is shown on the job."""


class Generator(Protocol):
    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Completion: ...


class Worker:
    """Runs claimed jobs in this process, at most `capacity` at once.

    The dispatcher never claims more than `free_slots()`, and the global cap is enforced in
    the database; the semaphore is the hard seatbelt should either ever be wrong.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        generator: Generator | None,
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
                await self._generate_and_finish(job)
        finally:
            del self._running[job.id]
            self._on_slot_freed()

    async def _generate_and_finish(self, job: ClaimedJob) -> None:
        try:
            if self._generator is None:
                raise GenerationFailed("no generator configured")
            completion = await self._generator.generate(
                job, Ledger(self._pool, job.id, job.attempt)
            )
            await self._complete(job, completion)
        except JobLost:
            _log_lost_race(job, "a model call")
        except asyncio.CancelledError:
            log.warning("job %s attempt %s stopped in this process", job.id, job.attempt)
            raise
        except Exception as error:
            message = str(error) if isinstance(error, GenerationFailed) else _describe(error)
            if isinstance(error, GenerationFailed):
                log.info("job %s attempt %s failed: %s", job.id, job.attempt, message)
            else:
                log.exception("job %s attempt %s crashed", job.id, job.attempt)
            await self._fail(job, message)

    async def _complete(self, job: ClaimedJob, completion: Completion) -> None:
        async with self._pool.acquire() as connection, connection.transaction():
            if (
                await connection.fetchval(queries["job_lock_if_generating"], job.id, job.attempt)
                is None
            ):
                _log_lost_race(job, "completion")
                return
            finished = await completion(connection)
            await connection.execute(
                queries["job_finish_if_generating"],
                job.id,
                job.attempt,
                finished.status,
                None,
                finished.mission_id,
                finished.instance_id,
            )
        log.info("job %s attempt %s %s", job.id, job.attempt, finished.status)

    async def _fail(self, job: ClaimedJob, error: str) -> None:
        failed = await self._pool.fetchval(
            queries["job_finish_if_generating"], job.id, job.attempt, "failed", error, None, None
        )
        if failed is None:
            _log_lost_race(job, "failure")

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
            _log_lost_race(job, "heartbeat")
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
            )
        return [row["id"] for row in rows]

    async def drain(self, grace_seconds: float | None) -> bool:
        """Wait for the generations under way to end; True when none is left."""
        tasks = [task for _, task in self._running.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace_seconds)
        return not self._running

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
    )


def _describe(error: BaseException) -> str:
    return f"generation crashed: {type(error).__name__}: {error}"
