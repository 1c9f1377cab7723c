"""Watching a chaos run from the database: every few milliseconds, from a connection of its
own that is made again after an outage, how many jobs are generating (the global cap must
hold) and which workers hold them (a killed worker's jobs must be reclaimed in time)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import asyncpg

from core.sql import DATABASE_ERRORS

IN_FLIGHT = """
SELECT count(*)::int AS in_flight, coalesce(array_agg(DISTINCT worker_id), '{}') AS holders
FROM generation_jobs WHERE status = 'generating'
"""


@dataclass
class Reclaim:
    """A killed worker's jobs, from the kill to the first sample that no longer shows them
    generating. A claim the worker sent just before it died may still commit after the kill,
    so a sample that shows its jobs again starts the wait anew."""

    worker_id: str
    killed_at: float
    reclaimed_at: float | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.reclaimed_at is None else self.reclaimed_at - self.killed_at


class Sampler:
    def __init__(self, database_url: str, every_seconds: float = 0.005) -> None:
        self._url = database_url
        self._every = every_seconds
        self.samples = 0
        self.highest = 0
        self.failed_samples = 0
        # Between two samples that both answered: the resolution of the reclaim times.
        self.longest_gap = 0.0
        self.holders: frozenset[str] = frozenset()
        self._reclaims: list[Reclaim] = []

    def watch(self, worker_id: str, killed_at: float) -> Reclaim:
        reclaim = Reclaim(worker_id, killed_at)
        self._reclaims.append(reclaim)
        return reclaim

    async def reclaimed(self, reclaim: Reclaim, within: float, settle: float = 0.5) -> None:
        """Until the reclaim has held for `settle` seconds, or `within` seconds have passed."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if (
                reclaim.reclaimed_at is not None
                and time.monotonic() - reclaim.reclaimed_at > settle
            ):
                return
            await asyncio.sleep(0.05)

    async def run(self, stop: asyncio.Event) -> None:
        connection: asyncpg.Connection | None = None
        last: float | None = None
        try:
            while not stop.is_set():
                try:
                    if connection is None or connection.is_closed():
                        connection = await asyncpg.connect(self._url, timeout=1)
                    sent = time.monotonic()
                    row = await connection.fetchrow(IN_FLIGHT, timeout=1)
                except DATABASE_ERRORS:
                    self.failed_samples += 1
                    await _close(connection)
                    connection, last = None, None
                    await asyncio.sleep(0.05)
                    continue
                arrived = time.monotonic()
                assert row is not None, "an aggregate returns one row"
                self._record(row["in_flight"], frozenset(row["holders"]), sent, arrived)
                if last is not None:
                    self.longest_gap = max(self.longest_gap, arrived - last)
                last = arrived
                await asyncio.sleep(self._every)
        finally:
            await _close(connection)

    def _record(self, in_flight: int, holders: frozenset[str], sent: float, arrived: float) -> None:
        self.samples += 1
        self.highest = max(self.highest, in_flight)
        self.holders = holders
        for reclaim in self._reclaims:
            if sent < reclaim.killed_at:
                continue  # its snapshot may predate the kill
            if reclaim.worker_id in holders:
                reclaim.reclaimed_at = None
            elif reclaim.reclaimed_at is None:
                reclaim.reclaimed_at = arrived


async def _close(connection: asyncpg.Connection | None) -> None:
    if connection is not None:
        with contextlib.suppress(*DATABASE_ERRORS):
            await connection.close(timeout=1)
