"""Running claimed jobs in this process: the in-process seatbelt, the generator call,
heartbeats, and reconciling what a crashed process left behind."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

import asyncpg

from core.sql import DATABASE_ERRORS, OUTAGE_ERRORS, Queries, outlasting_outages
from generation.claims import fenced, heartbeat
from generation.finisher import Ending, Failed, Finisher
from generation.jobs import ClaimedJob
from generation.ledger import JobLost, Ledger
from generation.provider import CallDeferred
from generation.sweeper import REQUEUE_ATTEMPTS_BELOW

queries = Queries("generation")
log = logging.getLogger(__name__)
T = TypeVar("T")

# How long a job's writes wait out a database outage before the worker gives up on them:
# starting a model call, writing the job's end (then the job goes back to the queue: heartbeats
# vouch for a job only while its generation runs or its end is written within this bound), and
# giving a job back (then the sweeper frees its slot).
PATIENCE_SECONDS = 30.0
# How long a generation that has ended may take to write its end at a stop, where the process
# manager's kill timeout is waiting (at most the patience); then it is released too.
FINISHING_SECONDS = 10.0
# A job whose heartbeat has been silent this long, held by a process of this worker that no
# longer exists, is presumed dead (the runtime passes two heartbeat intervals).
PRESUMED_DEAD_AFTER = timedelta(seconds=30)


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
        db: asyncpg.Pool,
        generator: Generator,
        *,
        name: str,
        capacity: int,
        host: str | None = None,
        presumed_dead_after: timedelta = PRESUMED_DEAD_AFTER,
        patience_seconds: float = PATIENCE_SECONDS,
        finishing_seconds: float = FINISHING_SECONDS,
        on_slot_freed: Callable[[], None] = lambda: None,
    ) -> None:
        self._db = db
        self._generator = generator
        self.name = name
        self.host = host or socket.gethostname()
        self.id = worker_identity(name, self.host, os.getpid())
        self.capacity = capacity
        self._slots = asyncio.Semaphore(capacity)
        # Keyed by job and attempt: a job given back may be claimed again by this worker while
        # its old attempt's task is still ending, and each must leave only its own entry.
        self._running: dict[tuple[int, int], tuple[ClaimedJob, asyncio.Task[None]]] = {}
        # Attempts whose generation has ended: their end, or their giving back, is being written.
        # No heartbeat reports them lost; a stop gives them a moment first.
        self._ending: set[tuple[int, int]] = set()
        self._finisher = Finisher(db)
        self._on_slot_freed = on_slot_freed
        self._presumed_dead_after = presumed_dead_after
        self._patience = patience_seconds
        self._finishing_seconds = min(finishing_seconds, patience_seconds)

    def free_slots(self) -> int:
        return self.capacity - len(self._running)

    def running(self) -> list[ClaimedJob]:
        return [job for job, _ in self._running.values()]

    def start(self, job: ClaimedJob) -> None:
        task = asyncio.create_task(self._run(job), name=f"job-{job.id}-attempt-{job.attempt}")
        self._running[_held(job)] = (job, task)

    async def _run(self, job: ClaimedJob) -> None:
        try:
            async with self._slots:
                ending = await self._generate(job)
                if ending is not None:
                    await self._end(job, ending)
        except asyncio.CancelledError:
            log.info(
                "job %s attempt %s stopped in this process",
                job.id,
                job.attempt,
                extra=self._fields(job),
            )
            raise
        finally:
            del self._running[_held(job)]
            self._ending.discard(_held(job))
            self._on_slot_freed()

    async def _generate(self, job: ClaimedJob) -> Ending | None:
        """The generation's ending, or None when the job is no longer this attempt's to end."""
        try:
            ledger = Ledger(
                self._db,
                job.id,
                job.attempt,
                lane=job.lane,
                start_patience_seconds=self._patience,
                process_silent_after=self._presumed_dead_after,
            )
            return await self._generator.generate(job, ledger)
        except JobLost:
            _log_lost_race(job, "a model call")
            return None
        except CallDeferred as deferred:
            await self._wait_for_batch(job, deferred.call_id)
            return None
        except GenerationFailed as error:
            log.info(
                "job %s attempt %s failed: %s", job.id, job.attempt, error, extra=self._fields(job)
            )
            return Failed(str(error))
        except OUTAGE_ERRORS as error:
            # The database went away longer than the generation's writes could wait: nothing is
            # wrong with the job, which goes back to the queue.
            log.warning(
                "job %s attempt %s: the database went away mid-generation (%s); giving the job "
                "back to the queue",
                job.id,
                job.attempt,
                error,
                extra=self._fields(job),
            )
            await self._give_back(job)
            return None
        except Exception as error:
            log.exception("job %s attempt %s crashed", job.id, job.attempt, extra=self._fields(job))
            return Failed(f"generation crashed: {type(error).__name__}: {error}")

    async def _end(self, job: ClaimedJob, ending: Ending) -> None:
        self._ending.add(_held(job))
        try:
            async with asyncio.timeout(self._patience):
                written = await self._finisher.finish(job, ending)
        except Exception as error:  # an outage past the finisher's patience, a driver fault
            log.error(  # noqa: TRY400 (the finisher logged what was unexpected)
                "job %s attempt %s: could not record its end (%s); giving the job back to the "
                "queue",
                job.id,
                job.attempt,
                _describe(error, self._patience),
                extra=self._fields(job),
            )
            await self._give_back(job)
            return
        if not written:
            _log_lost_race(job, "its final transition")

    async def _give_back(self, job: ClaimedJob) -> None:
        """Release one job whose generation cannot end here. If even that fails, the job leaves
        this worker anyway: no heartbeat vouches for it, and the sweeper frees its slot."""
        await self._leave(
            job,
            functools.partial(self._release, [job]),
            "give it back to the queue, the sweeper will fail it",
        )

    async def _wait_for_batch(self, job: ClaimedJob, call_id: int) -> None:
        """Give the job back to wait, off every slot, for the batch line of `call_id`. Should
        that fail, the sweeper gives it back with its call to take over."""
        waiting = await self._leave(
            job,
            functools.partial(
                self._db.fetchval,
                queries["job_wait_for_call_if_generating"],
                job.id,
                job.attempt,
                call_id,
            ),
            "give it back to wait for its batch, the sweeper will",
        )
        if waiting is None:
            _log_lost_race(job, "waiting for its batch")
            return
        log.info(
            "job %s attempt %s waits for call %s in a batch, off its slot",
            job.id,
            job.attempt,
            call_id,
            extra=self._fields(job),
        )

    async def _leave(
        self, job: ClaimedJob, write: Callable[[], Awaitable[T]], failing: str
    ) -> T | None:
        """Write how the job leaves this worker, waiting out an outage within the patience;
        None when it could not be written: no heartbeat vouches for the job from here on."""
        self._ending.add(_held(job))
        try:
            return await outlasting_outages(
                write, what=f"job {job.id} leaving its worker", patience_seconds=self._patience
            )
        except DATABASE_ERRORS as error:
            log.error(  # noqa: TRY400 (an outage, not a bug)
                "job %s attempt %s: could not %s: %s",
                job.id,
                job.attempt,
                failing,
                error,
                extra=self._fields(job),
            )
            return None

    def _fields(self, job: ClaimedJob) -> dict[str, object]:
        return {**job.log_fields(), "worker_id": self.id}

    async def heartbeat_once(self, now: datetime | None = None) -> list[ClaimedJob]:
        """Heartbeat every held job; stop and return those this worker no longer holds."""
        held = self.running()
        if not held:
            return []
        alive = await heartbeat(self._db, queries["jobs_heartbeat_if_generating"], held, now)
        # A job that ended while the heartbeat ran is gone from the table's generating rows
        # without being lost: only one still generating here, its end not being written, is.
        lost = [job for job in held if job.id not in alive and self._generating(job)]
        for job in lost:
            _log_lost_race(job, "a heartbeat")
            self._running[_held(job)][1].cancel()
        return lost

    def _generating(self, job: ClaimedJob) -> bool:
        """Running, its end not being written, and not given back at a release (then it is
        stopping already, and may be storing the id of its call under way)."""
        entry = self._running.get(_held(job))
        return entry is not None and _held(job) not in self._ending and not entry[1].cancelling()

    async def reconcile(self, now: datetime | None = None) -> list[int]:
        """Fail the jobs that other, now dead, processes of this worker on this machine held,
        once their heartbeats have been silent for `presumed_dead_after`: a live process beats
        sooner; a job with a model call to take over goes back to the queue instead. Faster than
        the sweeper, which waits for the heartbeat timeout."""
        rows = await self._db.fetch(queries["worker_ids_generating"])
        dead = [
            row["worker_id"]
            for row in rows
            if (owner := parse_worker_identity(row["worker_id"])) is not None
            and owner[:2] == (self.name, self.host)
            # This process's own identity (a pid reused, as in a restarted container) is
            # release_unheld's: whatever this process does not run goes back to the queue.
            and owner[2] != os.getpid()
            and not process_alive(owner[2])
        ]
        if not dead:
            return []
        now = now or await self._db.fetchval(queries["sweep_moment"])
        requeued = await self._db.fetch(
            queries["jobs_requeue_if_owned_by_dead_process_with_open_call"],
            dead,
            self._presumed_dead_after,
            now,
            REQUEUE_ATTEMPTS_BELOW,
        )
        for row in requeued:
            log.warning(
                "job %s went back to the queue as attempt %s: its worker died, and its model "
                "call goes on at the provider",
                row["id"],
                row["attempt"],
                extra={"job_id": row["id"], "attempt": row["attempt"]},
            )
        failed = await self._db.fetch(
            queries["jobs_fail_if_owned_by_dead_process"], dead, self._presumed_dead_after, now
        )
        for row in failed:
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
        return [row["id"] for row in [*requeued, *failed]]

    async def release_unheld(self) -> list[int]:
        """Give back the jobs generating under this worker's identity that it does not run: a
        claim committed them but its answer never arrived. Only between claims."""
        rows = await self._db.fetch(
            queries["jobs_release_if_not_held"], self.id, [job.id for job in self.running()]
        )
        for row in rows:
            log.warning(
                "job %s went back to the queue as attempt %s: its claim's answer was lost",
                row["id"],
                row["attempt"],
                extra={"job_id": row["id"], "attempt": row["attempt"], "worker_id": self.id},
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
        has ended is given a moment to write its end first (its result is paid for), and is
        released too if it could not."""
        released = await self._release_at_stop(
            [job for job in self.running() if _held(job) not in self._ending]
        )
        ending = [task for held, (_, task) in self._running.items() if held in self._ending]
        if ending:
            await asyncio.wait(ending, timeout=self._finishing_seconds)
        released += await self._release_at_stop(self.running())
        await self.stop()
        return released

    async def _release_at_stop(self, held: list[ClaimedJob]) -> list[int]:
        if not held:
            return []
        try:
            released = await self._release(held)
        except DATABASE_ERRORS as error:
            log.error(  # noqa: TRY400 (an outage, not a bug)
                "could not release %d job(s) back to the queue, the sweeper will fail them: %s",
                len(held),
                error,
                extra={"worker_id": self.id},
            )
            return []
        for job in held:
            if job.id in released and (entry := self._running.get(_held(job))) is not None:
                entry[1].cancel()
        return released

    async def _release(self, held: list[ClaimedJob]) -> list[int]:
        rows = await self._db.fetch(queries["jobs_release_if_generating"], *fenced(held))
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
        if not tasks:
            return
        for task in tasks:
            if not task.cancelling():
                task.cancel()
        # One given back at the release may be storing the id of its call under way, for the
        # next attempt to take over: it has a moment for that before it is cut short.
        _, late = await asyncio.wait(tasks, timeout=self._finishing_seconds)
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _held(job: ClaimedJob) -> tuple[int, int]:
    return job.id, job.attempt


def worker_identity(name: str, host: str, pid: int) -> str:
    """Who holds a job: the worker's name, its machine and its process, in `worker_id`."""
    return f"{name}:{host}:{pid}"


def parse_worker_identity(worker_id: str) -> tuple[str, str, int] | None:
    """(name, host, pid) of a `worker_identity`; a name may hold colons, a host name never
    does. None for any other shape."""
    rest, _, pid = worker_id.rpartition(":")
    name, _, host = rest.rpartition(":")
    if not (name and host and pid.isdigit()):
        return None
    return name, host, int(pid)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _describe(error: Exception, patience_seconds: float) -> str:
    if isinstance(error, TimeoutError):
        return f"not written within {patience_seconds:g} s"
    return f"{type(error).__name__}: {error}"


def _log_lost_race(job: ClaimedJob, step: str) -> None:
    log.warning(
        "job %s attempt %s lost its claim before %s (swept or released); nothing written",
        job.id,
        job.attempt,
        step,
        extra=job.log_fields(),
    )
