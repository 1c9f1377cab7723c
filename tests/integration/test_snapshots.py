"""A process's snapshot: one read at a time whoever asks, kept until it is too old, read again
after a failure, and never cancelled by a caller that gives up."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from core.sql import Connection
from server.snapshots import Snapshots
from tests.support.missions import add_mission


class HeldReads:
    """Counts the missions, once the test lets each read go; `fail` makes the next one raise."""

    def __init__(self) -> None:
        self.started = 0
        self.under_way = asyncio.Event()
        self.go = asyncio.Event()
        self.fail = False

    async def __call__(self, connection: Connection) -> int:
        self.started += 1
        self.under_way.set()
        await self.go.wait()
        if self.fail:
            self.fail = False
            raise asyncpg.PostgresConnectionError("the database went away")
        missions: int = await connection.fetchval("SELECT count(*) FROM missions")
        return missions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_callers_share_one_read_and_its_snapshot_until_it_is_too_old(
    database_url: str, pool: asyncpg.Pool
) -> None:
    reads, clock = HeldReads(), Clock()
    own = await asyncpg.create_pool(database_url, min_size=0, max_size=1)
    snapshots = Snapshots(own, reads, max_age_seconds=5, clock=clock)
    try:
        callers = [asyncio.create_task(snapshots.latest()) for _ in range(20)]
        await reads.under_way.wait()
        reads.go.set()
        assert await asyncio.gather(*callers) == [0] * 20
        assert reads.started == 1, "twenty callers, one read"

        await add_mission(pool)
        clock.now += 4.9
        assert await snapshots.latest() == 0, "not yet too old: the same snapshot"
        assert reads.started == 1
        clock.now += 0.1
        assert await snapshots.latest() == 1, "five seconds old: read again"
        assert reads.started == 2
    finally:
        await snapshots.close()
        await own.close()


async def test_a_failed_read_reaches_its_callers_and_the_next_caller_reads_again(
    database_url: str, pool: asyncpg.Pool
) -> None:
    reads = HeldReads()
    own = await asyncpg.create_pool(database_url, min_size=0, max_size=1)
    snapshots = Snapshots(own, reads, max_age_seconds=5)
    try:
        reads.fail = True
        callers = [asyncio.create_task(snapshots.latest()) for _ in range(3)]
        await reads.under_way.wait()
        reads.go.set()
        failed = await asyncio.gather(*callers, return_exceptions=True)
        assert [type(each) for each in failed] == [asyncpg.PostgresConnectionError] * 3
        await add_mission(pool)
        assert await snapshots.latest() == 1
        assert reads.started == 2
    finally:
        await snapshots.close()
        await own.close()


async def test_a_caller_that_gives_up_leaves_the_read_to_the_others(
    database_url: str,
) -> None:
    reads = HeldReads()
    own = await asyncpg.create_pool(database_url, min_size=0, max_size=1)
    snapshots = Snapshots(own, reads, max_age_seconds=5)
    try:
        first = asyncio.create_task(snapshots.latest())
        await reads.under_way.wait()
        second = asyncio.create_task(snapshots.latest())
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        reads.go.set()
        assert await second == 0
        assert reads.started == 1
    finally:
        await snapshots.close()
        await own.close()
