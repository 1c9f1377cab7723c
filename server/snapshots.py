"""One snapshot per process of what a read finds in the tables, shared by every caller.

However many callers ask at once, at most one read runs, on a pool of its own (one connection:
it never takes one that requests need), and the tables are read again only once the last
snapshot is older than its maximum age. A caller that asks during a read waits for that read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import asyncpg

from core.sql import Connection

log = logging.getLogger(__name__)
T = TypeVar("T")


class Snapshots(Generic[T]):
    def __init__(
        self,
        db: asyncpg.Pool,
        read: Callable[[Connection], Awaitable[T]],
        *,
        max_age_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._read = read
        self._max_age_seconds = max_age_seconds
        self._clock = clock
        # The last snapshot, and when its read started.
        self._latest: tuple[float, T] | None = None
        self._reading: asyncio.Task[T] | None = None

    async def latest(self) -> T:
        if self._latest is not None:
            taken_at, snapshot = self._latest
            if self._clock() - taken_at < self._max_age_seconds:
                return snapshot
        if self._reading is None:
            self._reading = asyncio.create_task(self._read_now())
            self._reading.add_done_callback(_retrieve_error)
        # Shielded: a caller that gives up (its request timed out) does not cancel the read
        # that the others wait for.
        return await asyncio.shield(self._reading)

    async def close(self) -> None:
        """Stop a read under way, so that its pool can close."""
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)

    async def _read_now(self) -> T:
        try:
            started = self._clock()
            async with self._db.acquire() as connection:
                snapshot = await self._read(connection)
            self._latest = (started, snapshot)
            return snapshot
        finally:
            self._reading = None


def _retrieve_error(read: asyncio.Task[T]) -> None:
    # The callers waiting for it answer with its error too, if any still wait.
    if not read.cancelled() and (error := read.exception()) is not None:
        log.warning("reading a snapshot failed: %s: %s", type(error).__name__, error)
