"""Workers as rows: a worker's name is held by one live process at a time; a worker is live,
with what it can make, while its heartbeat is younger than the timeout, a stopped one too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from generation import registry
from generation.registry import Capabilities, Registration, WorkerNameTaken
from generation.worker import Worker, worker_identity
from server.runtime import WorkerRuntime
from server.settings import Settings
from tests.support.fleet import EVERY_DOMAIN, capabilities_without
from tests.support.generators import Gated, Recording

TIMEOUT = timedelta(minutes=1)
PID_MAX = int(Path("/proc/sys/kernel/pid_max").read_text())


def registration(pool: asyncpg.Pool, host: str, name: str = "w_1") -> Registration:
    worker = Worker(pool, Recording(), name=name, host=host, capacity=2)
    capabilities = Capabilities(domains=("python-backend",), disabled={"sql-data": "no pgTAP"})
    return Registration(pool, worker, heartbeat_timeout=TIMEOUT, capabilities=capabilities)


async def held_by(pool: asyncpg.Pool, name: str = "w_1") -> str | None:
    value = await pool.fetchval("SELECT worker_id FROM workers WHERE name = $1", name)
    return None if value is None else str(value)


async def hold(pool: asyncpg.Pool, worker_id: str, silent_for: timedelta) -> None:
    await pool.execute(
        """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots)
           VALUES ('w_1', $1, now() - $2::interval, now() - $2::interval, 1)""",
        worker_id,
        silent_for,
    )


async def test_a_name_held_by_a_live_process_is_refused_to_another(pool: asyncpg.Pool) -> None:
    first = registration(pool, "box-a")
    await first.take()
    with pytest.raises(WorkerNameTaken, match=r"'w_1' is held by w_1:box-a:\d+"):
        await registration(pool, "box-b").take()
    row = await pool.fetchrow("SELECT * FROM workers WHERE name = 'w_1'")
    assert row is not None
    assert (row["slots"], row["domains"], row["disabled"]) == (
        2,
        ["python-backend"],
        {"sql-data": "no pgTAP"},
    )


async def test_names_are_matched_exactly(pool: asyncpg.Pool) -> None:
    await registration(pool, "box", name="w_1").take()
    for similar in ("wx1", "w%1", "w_1:box"):
        await registration(pool, "box", name=similar).take()
    assert await pool.fetchval("SELECT count(*) FROM workers") == 4


async def test_the_name_of_a_dead_process_of_this_machine_is_taken_over_at_once(
    pool: asyncpg.Pool,
) -> None:
    await hold(pool, worker_identity("w_1", "box", PID_MAX + 1), silent_for=timedelta(0))
    successor = registration(pool, "box")
    await successor.take()
    assert await held_by(pool) == successor.worker.id


async def test_a_dead_pid_on_another_machine_proves_nothing(pool: asyncpg.Pool) -> None:
    await hold(pool, worker_identity("w_1", "other-box", PID_MAX + 1), silent_for=timedelta(0))
    with pytest.raises(WorkerNameTaken):
        await registration(pool, "box").take()


async def test_a_name_silent_past_the_heartbeat_timeout_is_taken_over(
    pool: asyncpg.Pool,
) -> None:
    await hold(pool, worker_identity("w_1", "other-box", 7), silent_for=2 * TIMEOUT)
    successor = registration(pool, "box")
    await successor.take()
    assert await held_by(pool) == successor.worker.id


async def test_a_process_that_lost_its_name_says_so_and_leaves_the_holders_row_alone(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    old = registration(pool, "box-a")
    await old.take()
    await pool.execute("UPDATE workers SET heartbeat_at = now() - interval '1 hour'")
    new = registration(pool, "box-b")
    await new.take()
    before = await pool.fetchval("SELECT heartbeat_at FROM workers")
    await old.beat()
    assert "was taken by another process" in caplog.text
    assert await held_by(pool) == new.worker.id
    assert await pool.fetchval("SELECT heartbeat_at FROM workers") == before


async def test_only_workers_heartbeating_within_the_timeout_are_live(pool: asyncpg.Pool) -> None:
    await registration(pool, "box-a", name="fresh").take()
    await hold(pool, worker_identity("w_1", "box-b", 7), silent_for=TIMEOUT + timedelta(seconds=1))
    fleet = await registry.live(pool, heartbeat_timeout=TIMEOUT)
    assert [worker.name for worker in fleet.workers] == ["fresh"]
    [fresh] = fleet.workers
    assert (fresh.domains, fresh.disabled, fresh.slots, fresh.running) == (
        ["python-backend"],
        {"sql-data": "no pgTAP"},
        2,
        0,
    )
    assert (fleet.can_make("python-backend"), fleet.can_make("sql-data")) == (True, False)
    assert fleet.disabled_reasons("sql-data") == [registry.DisabledReason("fresh", "no pgTAP")]
    later = await registry.live(pool, heartbeat_timeout=TIMEOUT, now=datetime.now(UTC) + TIMEOUT)
    assert later.workers == []


async def test_a_stopped_worker_counts_until_its_row_lapses_and_a_successor_takes_over_at_once(
    pool: asyncpg.Pool, database_url: str, settings: Settings
) -> None:
    without_pgtap = capabilities_without(["sql-data"], "no pgTAP")
    stopped = WorkerRuntime(pool, database_url, settings, Gated(), capabilities=without_pgtap)
    await stopped.start()
    await stopped.stop()

    # A deploy's old worker has stopped and its successor has not started yet: what the old one
    # made still counts, so a user's generation is still enqueued meanwhile.
    fleet = await registry.live(pool, heartbeat_timeout=settings.heartbeat_timeout)
    assert [(each.name, each.running) for each in fleet.workers] == [("test-host", 0)]
    assert (fleet.can_make("python-backend"), fleet.can_make("sql-data")) == (True, False)
    lapsed = datetime.now(UTC) + settings.heartbeat_timeout
    later = await registry.live(pool, heartbeat_timeout=settings.heartbeat_timeout, now=lapsed)
    assert later.workers == []

    # Its successor takes the name at once (here the same process: the identity of a process
    # that restarted under a reused pid), with what it can make.
    successor = WorkerRuntime(pool, database_url, settings, Gated(), capabilities=EVERY_DOMAIN)
    await successor.start()
    try:
        assert await held_by(pool, "test-host") == successor.worker.id
        fleet = await registry.live(pool, heartbeat_timeout=settings.heartbeat_timeout)
        assert fleet.can_make("sql-data")
    finally:
        await successor.stop()
