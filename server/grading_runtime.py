"""A worker's grading side, wired from the settings: a prover of its own, so that gradings and
generation's proofs never wait for each other's sandbox slots; what it can grade on the
worker's row; the grader's tick, heartbeats and a LISTEN connection for wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from core.sql import DATABASE_ERRORS, Connection
from generation import gradings
from generation.grader import Grader
from generation.gradings import GRADINGS_CHANNEL
from qa.proof import LANGUAGES, Prover
from server import places
from server.database import CONNECT_TIMEOUT_SECONDS, connect_url
from server.settings import Settings

log = logging.getLogger(__name__)


class GradingRuntime:
    def __init__(self, grader: Grader, database_url: str, settings: Settings) -> None:
        self.grader = grader
        self._database_url = database_url
        self._settings = settings
        self._scheduler = AsyncIOScheduler(timezone=UTC)
        self._listener: Connection | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        await self._listen()
        every = {"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        self._scheduler.add_job(
            self._supervised(self._tick),
            "interval",
            seconds=self._settings.tick_seconds,
            next_run_time=datetime.now(UTC),
            **every,
        )
        self._scheduler.add_job(
            self._supervised(self.grader.heartbeat_once),
            "interval",
            seconds=self._settings.heartbeat_interval_seconds,
            **every,
        )
        self._scheduler.start()

    async def stop(self) -> None:
        self._scheduler.shutdown(wait=False)
        await self.grader.stop(self._settings.shutdown_grace_seconds)
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=CONNECT_TIMEOUT_SECONDS)
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(*DATABASE_ERRORS):
                await listener.close(timeout=CONNECT_TIMEOUT_SECONDS)

    def wake(self) -> None:
        """A NOTIFY or a freed slot: claim now, not at the next tick."""
        task = asyncio.get_running_loop().create_task(self._supervised(self.grader.claim)())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tick(self) -> None:
        if self._listener is None or self._listener.is_closed():
            await self._listen()
        await self.grader.run_once()

    def _supervised(
        self, run: Callable[[], Awaitable[object]]
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        async def supervised() -> None:
            try:
                await run()
            except DATABASE_ERRORS as error:
                log.warning("%s failed, will retry: %s", run.__qualname__, error)
            except Exception:
                log.exception("%s failed; it runs again at its next turn", run.__qualname__)

        return supervised

    async def _listen(self) -> None:
        try:
            self._listener = await connect_url(self._database_url)
            await self._listener.add_listener(GRADINGS_CHANNEL, lambda *_: self.wake())
        except DATABASE_ERRORS as error:
            self._listener = None
            log.warning("LISTEN for gradings failed, grading on the tick only: %s", error)


@asynccontextmanager
async def running_grader(
    db: asyncpg.Pool,
    database_url: str,
    settings: Settings,
    *,
    worker_name: str,
    worker_id: str,
) -> AsyncIterator[None]:
    """Grading beside the worker, started in the background: the worker (and the API of
    `warmpool serve`) need not wait for the grading prover's start-up checks. Until they are
    done this worker grades nothing, and says so on its row."""
    starting = asyncio.get_running_loop().create_task(
        _start(db, database_url, settings, worker_name=worker_name, worker_id=worker_id)
    )
    starting.add_done_callback(_log_failed_start)
    try:
        yield
    finally:
        if not starting.done():
            starting.cancel()
        await asyncio.wait([starting])
        failed = starting.cancelled() or starting.exception() is not None
        started = None if failed else starting.result()
        if started is not None:
            runtime, prover = started
            try:
                await runtime.stop()
            finally:
                await prover.close()


def _log_failed_start(starting: asyncio.Task[tuple[GradingRuntime, Prover]]) -> None:
    if not starting.cancelled() and (error := starting.exception()) is not None:
        log.error("grading could not start on this worker, which grades nothing", exc_info=error)


async def _start(
    db: asyncpg.Pool,
    database_url: str,
    settings: Settings,
    *,
    worker_name: str,
    worker_id: str,
) -> tuple[GradingRuntime, Prover]:
    folders = places.of(settings.data_dir)
    prover = await Prover.start(
        work_root=folders.gradings,
        toolchain_root=folders.toolchain,
        postgres_admin_url=settings.proof_database_url or database_url,
        slots=settings.proof_slots,
        time_limit_s=settings.grading_time_limit_seconds,
    )
    runtime: GradingRuntime | None = None
    try:
        languages: list[str] = []
        disabled: dict[str, str] = {}
        for language in LANGUAGES:
            problem = prover.availability(language, "untrusted")
            if problem is None:
                languages.append(language)
            else:
                disabled[language] = problem
                log.warning("grading of %s is disabled on this worker: %s", language, problem)
        grader = Grader(
            db,
            prover,
            worker_id=worker_id,
            capacity=settings.proof_slots,
            global_cap=settings.gradings_cap,
            languages=languages,
            heartbeat_timeout=settings.heartbeat_timeout,
            pending_expiry=timedelta(seconds=settings.pending_expiry_seconds),
            time_limit_s=settings.grading_time_limit_seconds,
            on_slot_freed=lambda: runtime.wake() if runtime is not None else None,
        )
        runtime = GradingRuntime(grader, database_url, settings)
        await runtime.start()
        await gradings.say_what_worker_grades(db, worker_name, worker_id, languages, disabled)
    except BaseException:
        if runtime is not None:
            await runtime.stop()
        await prover.close()
        raise
    log.info(
        "grading %s on %d slots of its own, cap %d",
        ", ".join(languages) or "nothing",
        settings.proof_slots,
        settings.gradings_cap,
        extra={"worker_id": worker_id, "prover": "grading", "slot_uids": list(prover.slot_uids)},
    )
    return runtime, prover
