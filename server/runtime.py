"""The worker side of a process: dispatcher, sweeper, heartbeats, retention (of jobs and of
reviewer sessions) and replenishment on apscheduler, plus a LISTEN connection so a NOTIFY fills
a free slot within milliseconds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from core.domains import DomainMap
from core.sql import DATABASE_ERRORS, Connection
from generation.abandoned import AbandonedCalls
from generation.budget import Budget
from generation.dispatcher import NOTIFY_CHANNEL, Dispatcher
from generation.metrics import QueueMetrics
from generation.provider import Abandon, Batches
from generation.registry import Capabilities, Registration
from generation.retention import Retention
from generation.sweeper import Sweeper
from generation.worker import Generator, Worker
from pool.replenish import Replenisher
from server import services
from server.database import CONNECT_TIMEOUT_SECONDS, connect_url
from server.generation_wiring import ChosenProvider, mission_pipeline, spend_budget
from server.grading_runtime import running_grader
from server.reviewer_sessions import SessionRetention
from server.settings import Settings

log = logging.getLogger(__name__)

RETENTION_EVERY = timedelta(minutes=10)
# At a stop, how long a scheduled pass under way (a tick, a replenishment) may take to end.
PASS_GRACE_SECONDS = 10


class WorkerRuntime:
    def __init__(
        self,
        db: asyncpg.Pool,
        database_url: str,
        settings: Settings,
        generator: Generator,
        *,
        capabilities: Capabilities,
        replenisher: Replenisher | None = None,
        metrics: QueueMetrics | None = None,
        budget: Budget | None = None,
        abandon: Abandon | None = None,
        call_ceiling_usd: Decimal = Decimal(0),
        batches: Batches | None = None,
    ) -> None:
        self._database_url = database_url
        self._settings = settings
        self.worker = Worker(
            db,
            generator,
            name=settings.worker_name,
            capacity=settings.worker_slots,
            presumed_dead_after=timedelta(seconds=2 * settings.heartbeat_interval_seconds),
            on_slot_freed=self._wake,
        )
        self.registration = Registration(
            db,
            self.worker,
            heartbeat_timeout=settings.heartbeat_timeout,
            capabilities=capabilities,
        )
        self.sweeper = Sweeper(
            db,
            heartbeat_timeout=settings.heartbeat_timeout,
            stuck_after=timedelta(seconds=settings.stuck_after_seconds),
            pending_expiry=timedelta(seconds=settings.pending_expiry_seconds),
            metrics=metrics,
        )
        self.dispatcher = Dispatcher(
            db,
            self.worker,
            self.sweeper,
            global_cap=settings.global_cap,
            replenish_cap=settings.replenish_cap,
            budget=budget,
            domains=capabilities.domains,
        )
        self.retention = Retention(db, keep_for=timedelta(seconds=settings.job_retention_seconds))
        self.session_retention = SessionRetention(db)
        # Cancels at the provider the calls no job will use; only with a provider that has any.
        self.abandoned = (
            None
            if abandon is None
            else AbandonedCalls(
                db,
                abandon,
                budget=budget,
                abandon_line=None if batches is None else batches.abandon,
                request_seconds=settings.openai_timeout_seconds,
                call_ceiling_usd=call_ceiling_usd,
            )
        )
        # Submits the batch lines and polls their batches; every worker schedules its pass, the
        # leader lock runs one at a time.
        self.batches = batches
        # Every worker schedules replenishment passes; the leader lock runs one at a time.
        self.replenisher = replenisher
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._passes: set[asyncio.Task[Any]] = set()
        self._listener: Connection | None = None

    async def start(self) -> None:
        """Raises WorkerNameTaken while another live process runs under this worker's name."""
        await self.registration.take()
        # The first tick, at once, settles what earlier processes of this worker left behind.
        await self._listen()
        every = {"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        now = datetime.now(UTC)
        self._schedule(self._tick, self._settings.tick_seconds, next_run_time=now, **every)
        self._heartbeats = self._schedule(
            self._heartbeat, self._settings.heartbeat_interval_seconds, **every
        )
        self._schedule(self.retention.run_once, RETENTION_EVERY.total_seconds(), **every)
        self._schedule(self.session_retention.run_once, RETENTION_EVERY.total_seconds(), **every)
        if self.abandoned is not None:
            cancel = _retried(self.abandoned.run_once, "cancelling abandoned calls")
            self._schedule(cancel, self._settings.tick_seconds, **every)
        if self.batches is not None:
            batch_pass = _retried(self.batches.run_once, "batch pass")
            self._schedule(batch_pass, self._settings.tick_seconds, next_run_time=now, **every)
        if self.replenisher is not None:
            self._schedule(
                _retried(self.replenisher.run_once, "replenishment pass"),
                self._settings.replenish_seconds,
                next_run_time=now,
                **every,
            )
        self._scheduler.start()
        log.info(
            "worker %s started: global cap %d, tick %gs",
            self.worker.id,
            self._settings.global_cap,
            self._settings.tick_seconds,
        )

    async def stop(self) -> None:
        """Stop claiming, let the generations under way finish within the shutdown grace, give
        what is left back to the queue, then stop."""
        for job in self._scheduler.get_jobs():
            if job.id != self._heartbeats.id:
                job.remove()
        # From here on a NOTIFY or a freed slot wakes the dispatcher in vain.
        await self.dispatcher.stop()
        grace = self._settings.shutdown_grace_seconds
        under_way = len(self.worker.running())
        if under_way:
            log.info(
                "stopping: claiming nothing more, %d generation(s) under way get %gs to finish",
                under_way,
                grace,
                extra={"worker_id": self.worker.id},
            )
        # Heartbeats go on until the release, so no sweeper takes a draining job for a dead
        # one's.
        drained = await self.worker.drain(grace)
        await self._unlisten()
        if not drained:
            await self.worker.release()
        self._heartbeats.remove()
        # The scheduler's shutdown cancels the passes under way: they end first.
        if self._passes:
            await asyncio.wait(self._passes, timeout=PASS_GRACE_SECONDS)
        self._scheduler.shutdown(wait=False)
        # The row stays, saying that nothing runs here: what this worker could make counts until
        # it lapses at the heartbeat timeout, and a successor on this machine takes the name at
        # once.
        try:
            await self.registration.beat()
        except DATABASE_ERRORS as error:
            log.warning("could not say that this worker stopped; its row lapses anyway: %s", error)
        log.info("worker %s stopped", self.worker.id, extra={"worker_id": self.worker.id})

    def _schedule(
        self, run: Callable[[], Awaitable[object]], seconds: float, **options: Any
    ) -> Job:
        async def tracked() -> None:
            task = asyncio.current_task()
            assert task is not None
            self._passes.add(task)
            try:
                await run()
            except Exception:
                # A database error is handled inside each pass; this is a bug. The schedule
                # goes on, so the next turn runs the pass again.
                log.exception("%s failed; it runs again at its next turn", run.__qualname__)
            finally:
                self._passes.discard(task)

        return self._scheduler.add_job(
            tracked, "interval", seconds=seconds, name=run.__qualname__, **options
        )

    async def _tick(self) -> None:
        if self._listener is None or self._listener.is_closed():
            await self._listen()
        await self.dispatcher.tick()

    async def _heartbeat(self) -> None:
        try:
            await self.worker.heartbeat_once()
            await self.registration.beat()
        except DATABASE_ERRORS as error:
            log.warning("heartbeat failed, will retry: %s", error)

    async def _listen(self) -> None:
        # A dedicated connection: a pooled one would lose its LISTEN when returned to the pool.
        # When it breaks (Postgres restarted), the tick keeps dispatching and reconnects it.
        try:
            self._listener = await connect_url(self._database_url)
            await self._listener.add_listener(NOTIFY_CHANNEL, self._on_notify)
        except DATABASE_ERRORS as error:
            self._listener = None
            log.warning("LISTEN failed, dispatching on the tick only until it works: %s", error)

    async def _unlisten(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            # A close that fails (the database is gone) has aborted the connection already.
            with contextlib.suppress(*DATABASE_ERRORS):
                await listener.close(timeout=CONNECT_TIMEOUT_SECONDS)

    def _on_notify(self, *_: Any) -> None:
        self._wake()

    def _wake(self) -> None:
        self.dispatcher.wake()


def _retried(run: Callable[[], Awaitable[object]], what: str) -> Callable[[], Awaitable[None]]:
    """A pass that a database outage only postpones to its next turn."""

    async def guarded() -> None:
        try:
            await run()
        except DATABASE_ERRORS as error:
            log.warning("%s failed, will retry: %s", what, error)

    guarded.__qualname__ = getattr(run, "__qualname__", what)
    return guarded


@asynccontextmanager
async def running_worker(
    db: asyncpg.Pool,
    database_url: str,
    settings: Settings,
    domain_map: DomainMap,
    chosen: ChosenProvider,
    metrics: QueueMetrics | None = None,
) -> AsyncIterator[WorkerRuntime]:
    """A worker generating real missions with the chosen provider: the mission pipeline,
    dispatched and swept, and the pool's replenishment; counted in `metrics` when this process
    serves /metrics. Beside it, the grading of candidates' fixes."""
    async with mission_pipeline(db, settings, domain_map, database_url, chosen) as pipeline:
        runtime = WorkerRuntime(
            db,
            database_url,
            settings,
            pipeline,
            capabilities=Capabilities.judged(domain_map.domains.values(), pipeline.unavailable),
            replenisher=services.replenisher(db, settings, domain_map, metrics),
            metrics=metrics,
            budget=spend_budget(settings, chosen.provider),
            abandon=chosen.provider.abandon,
            call_ceiling_usd=chosen.provider.worst_case_cost_usd(1),
            batches=chosen.provider.batch_lane(
                db, size=settings.batch_size, wait_seconds=settings.batch_wait_seconds
            ),
        )
        await runtime.start()
        try:
            async with running_grader(
                db,
                database_url,
                settings,
                worker_name=runtime.worker.name,
                worker_id=runtime.worker.id,
            ):
                yield runtime
        finally:
            await runtime.stop()
