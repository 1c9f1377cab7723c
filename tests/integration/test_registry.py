"""Workers as rows: a worker's name is held by one live process at a time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from generation.registry import Capabilities, Registration, WorkerNameTaken
from generation.worker import Worker, worker_identity
from tests.support.generators import Recording

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


async def test_a_process_that_lost_its_name_says_so_and_gives_up_only_its_own(
    pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    old = registration(pool, "box-a")
    await old.take()
    await pool.execute("UPDATE workers SET heartbeat_at = now() - interval '1 hour'")
    new = registration(pool, "box-b")
    await new.take()
    await old.beat()
    assert "was taken by another process" in caplog.text
    await old.give_up()
    assert await held_by(pool) == new.worker.id
    await new.give_up()
    assert await held_by(pool) is None
