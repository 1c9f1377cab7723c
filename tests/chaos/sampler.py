"""Watching a chaos run from the database: every few milliseconds, from a connection of its
own that is made again after an outage, how many jobs are generating (the global cap must
hold), which workers hold them (a killed worker's jobs must be reclaimed in time) and how long
the oldest has been generating beyond the time its work takes (none may stay once a fault is
over); every tenth of a second, how many jobs have ended (completions must come back to the
offered rate)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import asyncpg

from core.sql import DATABASE_ERRORS
from tests.chaos.faults import connect_observer
from tests.chaos.verdict import FINAL_STATUSES

# Ages on the database's clock, which set started_at, less the seconds the job's domain may
# take ($1: domain -> seconds; none for a domain not named).
IN_FLIGHT = """
WITH generating AS (
    SELECT id, worker_id,
           extract(epoch FROM now() - started_at)::float8
               - coalesce(($1::jsonb ->> domain)::float8, 0) AS age
    FROM generation_jobs WHERE status = 'generating'
)
SELECT count(*)::int AS in_flight, coalesce(array_agg(DISTINCT worker_id), '{}') AS holders,
       greatest(coalesce(max(age), 0), 0) AS oldest_age,
       (array_agg(id ORDER BY age DESC))[1] AS oldest_id
FROM generating
"""

# Reads every job: sampled less often than the in-flight rows, which a partial index finds.
ENDED = "SELECT count(*)::int FROM generation_jobs WHERE status = ANY($1::text[])"
ENDINGS = sorted(FINAL_STATUSES)


class Oldest(NamedTuple):
    """The oldest generating job in a sample, its age less its domain's allowance (age 0 and no
    id when none was generating)."""

    at: float
    age: float
    job_id: int | None


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
    def __init__(
        self,
        database_url: str,
        *,
        allowances: Mapping[str, float] | None = None,
        every_seconds: float = 0.005,
        ended_every_seconds: float = 0.1,
    ) -> None:
        self._url = database_url
        # The seconds a domain's job may generate beyond a job that proves nothing.
        self._allowances = json.dumps(dict(allowances or {}))
        self._every = every_seconds
        self._ended_every = ended_every_seconds
        self.samples = 0
        self.highest = 0
        self.failed_samples = 0
        # Between two samples that both answered: the resolution of the reclaim times.
        self.longest_gap = 0.0
        self.holders: frozenset[str] = frozenset()
        self.oldest: list[Oldest] = []
        # (when the sample was sent, how many jobs had ended by then)
        self.ended: list[tuple[float, int]] = []
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
        ended_due = 0.0
        try:
            while not stop.is_set():
                try:
                    if connection is None or connection.is_closed():
                        connection = await connect_observer(self._url, within_seconds=1)
                    sent = time.monotonic()
                    if sent >= ended_due:
                        ended = await connection.fetchval(ENDED, ENDINGS, timeout=1)
                        self.ended.append((sent, ended))
                        ended_due = sent + self._ended_every
                        sent = time.monotonic()
                    row = await connection.fetchrow(IN_FLIGHT, self._allowances, timeout=1)
                except DATABASE_ERRORS:
                    self.failed_samples += 1
                    await _close(connection)
                    connection, last = None, None
                    await asyncio.sleep(0.05)
                    continue
                arrived = time.monotonic()
                assert row is not None, "an aggregate returns one row"
                self._record(row["in_flight"], frozenset(row["holders"]), sent, arrived)
                self.oldest.append(Oldest(sent, row["oldest_age"], row["oldest_id"]))
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
