"""Several worker processes against one Postgres: the global cap, exactly-once runs, and a
worker killed mid-job."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import Callable

import asyncpg
import pytest

from generation.worker import parse_worker_identity
from tests.support.jobs import LIMITS, enqueue
from tests.support.polling import eventually
from tests.support.server import Process
from tests.support.worker_process import RUNS_TABLE

pytestmark = pytest.mark.slow


async def test_four_workers_drain_300_jobs_under_a_cap_of_5_each_exactly_once(
    pool: asyncpg.Pool, workers: Callable[..., Process]
) -> None:
    await pool.execute(RUNS_TABLE)
    limits = LIMITS.__class__(user_cap=1000, max_pending=1000, replenish_max_pending=1000)
    for index in range(300):
        await enqueue(pool, f"user-{index % 60}", limits=limits)
    for _ in range(4):
        # Two slots per worker: no single worker can hold the whole cap, so all compete.
        workers("sleep", "0.02", "0.2", global_cap="5", worker_concurrency="2", tick_seconds="0.5")

    samples, highest = 0, 0
    async with pool.acquire() as sampler:
        deadline = time.monotonic() + 90
        while True:
            counts = await sampler.fetchrow(
                """SELECT count(*) FILTER (WHERE status = 'generating'),
                          count(*) FILTER (WHERE status = 'completed')
                   FROM generation_jobs"""
            )
            assert counts is not None, "an aggregate returns one row"
            generating, done = counts
            samples += 1
            highest = max(highest, generating)
            if done == 300:
                break
            assert time.monotonic() < deadline, f"only {done} of 300 jobs completed"
            await asyncio.sleep(0.003)

    print(f"in-flight sampled {samples} times, highest {highest}")
    assert 0 < highest <= 5
    runs = await pool.fetch("SELECT job_id, count(*) AS runs FROM generation_runs GROUP BY job_id")
    assert len(runs) == 300
    assert {row["runs"] for row in runs} == {1}, "every job ran exactly once"
    pids = await pool.fetchval("SELECT count(DISTINCT pid) FROM generation_runs")
    assert pids >= 3, "several worker processes took part"
    ledger = await pool.fetchval(
        "SELECT count(*) FROM llm_calls WHERE outcome = 'ok' AND attempt = 1"
    )
    assert ledger == 300


async def test_a_killed_workers_job_is_failed_by_a_survivor_and_its_slot_reused(
    pool: asyncpg.Pool, workers: Callable[..., Process]
) -> None:
    await pool.execute(RUNS_TABLE)
    timeout, tick = 2.0, 0.5
    settings = {
        "global_cap": "1",
        "tick_seconds": str(tick),
        "heartbeat_timeout_seconds": str(timeout),
    }
    processes = [workers("hang", **settings), workers("hang", **settings)]
    first = await enqueue(pool, "user-1")

    async def claimed() -> bool:
        return bool(
            await pool.fetchval("SELECT worker_id FROM generation_jobs WHERE id = $1", first)
        )

    await eventually(claimed, 20, "the first job to be claimed")
    owner = await pool.fetchval("SELECT worker_id FROM generation_jobs WHERE id = $1", first)
    victim = next(process for process in processes if owner.endswith(f":{process.popen.pid}"))
    victim.popen.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    second = await enqueue(pool, "user-2")

    async def first_failed() -> bool:
        status = await pool.fetchval("SELECT status FROM generation_jobs WHERE id = $1", first)
        return bool(status == "failed")

    await eventually(
        first_failed, timeout + tick + 5, "the dead worker's job to be swept", every=0.02
    )
    reclaimed_after = time.monotonic() - killed_at
    error = await pool.fetchval("SELECT error FROM generation_jobs WHERE id = $1", first)
    print(f"reclaimed {reclaimed_after:.2f}s after the kill: {error}")
    assert "stopped heartbeating" in error
    assert reclaimed_after <= timeout + tick + 0.5

    async def second_running() -> bool:
        status = await pool.fetchval("SELECT status FROM generation_jobs WHERE id = $1", second)
        return bool(status == "generating")

    await eventually(second_running, 5, "the freed slot to be used")
    survivor = next(process for process in processes if process is not victim)
    holder = await pool.fetchval("SELECT worker_id FROM generation_jobs WHERE id = $1", second)
    assert (parse_worker_identity(holder) or ())[1:] == (socket.gethostname(), survivor.popen.pid)


async def test_a_notify_fills_a_free_slot_long_before_the_tick(
    pool: asyncpg.Pool, workers: Callable[..., Process]
) -> None:
    await pool.execute(RUNS_TABLE)
    worker = workers("sleep", "0", "0", tick_seconds="300")
    await eventually(
        lambda: pool.fetchval("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"),
        20,
        "the worker to listen",
    )
    assert worker.popen.poll() is None
    job = await enqueue(pool, "user-1")
    enqueued = time.monotonic()

    async def ran() -> bool:
        return bool(
            await pool.fetchval("SELECT count(*) FROM generation_runs WHERE job_id = $1", job)
        )

    await eventually(ran, 5, "the NOTIFY to wake the worker")
    print(
        f"picked up {1000 * (time.monotonic() - enqueued):.0f} ms after the enqueue; the tick is 300 s"
    )
