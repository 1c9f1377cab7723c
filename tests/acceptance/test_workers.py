"""Several worker processes against one Postgres: the global cap, exactly-once runs, a worker
killed mid-job, and a fleet whose workers cannot all make every domain."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg
import httpx
import pytest

from generation.worker import parse_worker_identity
from tests.support.http import bearer
from tests.support.jobs import LIMITS, enqueue
from tests.support.polling import eventually
from tests.support.server import Process, create_keys, running_server
from tests.support.worker_process import RUNS_TABLE, TOLD_NOT_TO

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


async def test_a_mixed_fleet_routes_each_domain_to_a_worker_that_can_make_it(
    pool: asyncpg.Pool, database_url: str, workers: Callable[..., Process], tmp_path: Path
) -> None:
    """One worker without pgTAP: a data engineer's serve without stock gets a python job, and
    none fails as disabled; then a second worker that can make sql-data: the sql jobs go to it
    alone, though the first has free slots all along."""
    await pool.execute(RUNS_TABLE)
    settings = {"tick_seconds": "0.5"}
    no_pgtap = workers("--cannot-make=sql-data", "sleep", "0", "0.01", **settings)
    await eventually(lambda: live_workers(pool, 1), 20, "the first worker's row")
    keys = await create_keys(database_url)
    app, admin = bearer(keys["candidate_app"]), bearer(keys["admin"])
    with running_server(database_url, tmp_path) as url:
        async with httpx.AsyncClient(base_url=url) as client:

            async def serve(user: str) -> str:
                body = {"user_id": user, "track": "data-engineer"}
                answer = await client.post("/v1/serve", json=body, headers=app)
                assert answer.status_code == 202, answer.text
                return str(answer.json()["job"]["domain"])

            assert {await serve(f"early-{index}") for index in range(6)} == {"python-backend"}

            # Slow and one slot at a time: the first worker would take the sql jobs it could.
            with_pgtap = workers("sleep", "0.2", "0.2", worker_concurrency="1", **settings)
            await eventually(lambda: live_workers(pool, 2), 20, "the second worker's row")
            listed = (await client.get("/v1/workers", headers=admin)).json()["workers"]
            assert sorted(each["disabled"].get("sql-data", "") for each in listed) == [
                "",
                TOLD_NOT_TO,
            ]
            # Both domains can be made now, and neither has stock: the track's first.
            assert {await serve(f"late-{index}") for index in range(6)} == {"sql-data"}

    async def drained() -> bool:
        return not await pool.fetchval(
            "SELECT count(*) FROM generation_jobs WHERE status IN ('pending', 'generating')"
        )

    await eventually(drained, 60, "every job to end")
    jobs = await pool.fetch(
        """SELECT j.domain, j.status, j.error, r.pid
           FROM generation_jobs j JOIN generation_runs r ON r.job_id = j.id"""
    )
    assert len(jobs) == 12
    assert [row["error"] for row in jobs if row["status"] != "completed"] == [], "none failed"
    sql_runners = {row["pid"] for row in jobs if row["domain"] == "sql-data"}
    assert sql_runners == {with_pgtap.popen.pid}
    assert no_pgtap.popen.pid in {row["pid"] for row in jobs}


async def live_workers(pool: asyncpg.Pool, count: int) -> bool:
    live = await pool.fetchval(
        "SELECT count(*) FROM workers WHERE heartbeat_at > now() - interval '1 minute'"
    )
    return bool(live == count)
