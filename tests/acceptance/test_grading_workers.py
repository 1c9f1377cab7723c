"""Grading across several real `warmpool worker` processes behind one API process: the grading
cap sampled from the table, the per-user cap, exactly one grading per submission and key, a
worker killed mid-grading whose grading another worker takes back and finishes, and grading
and generation on one worker, neither waiting for the other's backlog."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.grading import HARD_CODED, domain_map, graders_ready, serve, stock, submit
from tests.support.polling import eventually
from tests.support.proving import ensure_toolchain
from tests.support.server import Process, create_keys, environment, running_server, spawn

pytestmark = pytest.mark.slow


@pytest.fixture
def grading_workers(database_url: str, tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Starts `warmpool worker` processes on the test database, stopped at the end."""
    ensure_toolchain()
    started: list[Process] = []

    def start(**settings: str) -> Process:
        overrides = {"WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)), **settings}
        log = tmp_path / f"worker-{len(started)}.log"
        process = spawn(
            [sys.executable, "-m", "server", "worker"], environment(database_url, overrides), log
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


# 200 sandboxed runs on two cores: minutes, not the suite's default two.
@pytest.mark.timeout(900)
async def test_100_submissions_of_50_users_under_a_grading_cap_of_3(
    database_url: str,
    pool: asyncpg.Pool,
    tmp_path: Path,
    grading_workers: Callable[..., Process],
) -> None:
    keys = await create_keys(database_url)
    await stock(pool)
    settings = {
        "WARMPOOL_GRADING_CAP": "3",
        "WARMPOOL_TICK_SECONDS": "0.5",
        "WARMPOOL_REQUEST_TIMEOUT_SECONDS": "30",
    }
    overrides = {"WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)), **settings}
    with running_server(database_url, tmp_path, overrides=overrides, ready_within=120) as url:
        for _ in range(3):  # two grading slots each: six slots for a cap of three
            grading_workers(**settings)
        await graders_ready(pool, count=3)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            app = keys["candidate_app"]
            users = [f"candidate-{number}" for number in range(50)]
            instances = [await serve(client, app, user) for user in users]
            sent = [
                (instance["id"], {"pricing.py": HARD_CODED + f"# try {attempt}\n"}, key)
                for instance in instances
                for attempt, key in ((1, f"{instance['id']}-a"), (2, f"{instance['id']}-b"))
            ]
            repeated = sent[:10]
            # Eight requests under way at a time: the claim is what runs concurrently here.
            turns = asyncio.Semaphore(8)

            async def send(submission: tuple[str, dict[str, str], str]) -> httpx.Response:
                async with turns:
                    return await submit(client, app, *submission)

            answers = await asyncio.gather(*map(send, sent + repeated))
    statuses = [answer.status_code for answer in answers]
    assert statuses == [202] * 100 + [200] * 10, [a.text for a in answers if a.status_code >= 400]
    ids = [answer.json()["submission"]["id"] for answer in answers]
    assert ids[100:] == ids[:10], "a repeated key answers with the first submission"

    samples, highest, highest_per_user = 0, 0, 0
    async with pool.acquire() as sampler:
        deadline = time.monotonic() + 600
        while True:
            row = await sampler.fetchrow(
                """SELECT count(*) FILTER (WHERE status = 'running') AS running,
                          count(*) FILTER (WHERE status IN ('passed', 'failed', 'error')) AS done,
                          (SELECT coalesce(max(active), 0) FROM (
                               SELECT count(*) AS active FROM submissions
                               WHERE status IN ('pending', 'running') GROUP BY user_id
                           ) per_user) AS per_user
                   FROM submissions"""
            )
            assert row is not None
            samples += 1
            highest = max(highest, row["running"])
            highest_per_user = max(highest_per_user, row["per_user"])
            if row["done"] == 100:
                break
            assert time.monotonic() < deadline, f"only {row['done']} of 100 graded"
            await asyncio.sleep(0.005)
    print(f"running sampled {samples} times, highest {highest}")
    assert 0 < highest <= 3
    assert highest_per_user <= 2
    rows = await pool.fetch("SELECT status, attempt, worker_id, hidden_total FROM submissions")
    assert len(rows) == 100
    assert {(row["status"], row["attempt"], row["hidden_total"]) for row in rows} == {
        ("failed", 1, 2)
    }, "each graded once, with its hidden tests"
    assert len({row["worker_id"] for row in rows}) > 1, "the workers shared the gradings"


@pytest.mark.timeout(600)
async def test_a_worker_killed_mid_grading_has_it_finished_by_another(
    database_url: str,
    pool: asyncpg.Pool,
    tmp_path: Path,
    grading_workers: Callable[..., Process],
) -> None:
    keys = await create_keys(database_url)
    await stock(pool)
    settings = {"WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS": "2", "WARMPOOL_TICK_SECONDS": "0.5"}
    slow = HARD_CODED.replace(
        "def total(prices, discount):\n",
        "def total(prices, discount):\n    __import__('time').sleep(3)\n",
    )
    overrides = {"WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)), **settings}
    with running_server(database_url, tmp_path, overrides=overrides, ready_within=120) as url:
        workers = {grading_workers(**settings).popen.pid for _ in range(2)}
        await graders_ready(pool, count=2)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            instance = await serve(client, keys["candidate_app"], "ada")
            answer = await submit(
                client, keys["candidate_app"], instance["id"], {"pricing.py": slow}, "slow"
            )
            assert answer.status_code == 202, answer.text
            submission_id = int(answer.json()["submission"]["id"])

            async def held() -> str | None:
                holder: str | None = await pool.fetchval(
                    "SELECT worker_id FROM submissions WHERE id = $1 AND status = 'running'",
                    submission_id,
                )
                return holder

            holder = await eventually(held, 60, "a worker to grade the submission")
            killed = int(holder.rpartition(":")[2])
            assert killed in workers
            os.kill(killed, signal.SIGKILL)

            async def finished() -> asyncpg.Record | None:
                row: asyncpg.Record | None = await pool.fetchrow(
                    "SELECT status, attempt, worker_id, hidden_total FROM submissions "
                    "WHERE id = $1 AND status IN ('passed', 'failed', 'error')",
                    submission_id,
                )
                return row

            row = await eventually(finished, 90, "the grading to be finished by another worker")
    assert (row["status"], row["attempt"], row["hidden_total"]) == ("failed", 2, 2)
    [other] = workers - {killed}
    assert row["worker_id"].endswith(f":{other}")


# Sampled together: gradings running and not yet ended, jobs generating and ended.
TOGETHER = """
SELECT (SELECT count(*) FROM submissions WHERE status = 'running') AS grading,
       (SELECT count(*) FROM submissions WHERE status IN ('pending', 'running')) AS backlog,
       (SELECT count(*) FROM submissions WHERE status IN ('passed', 'failed', 'error'))
           AS graded,
       (SELECT count(*) FROM generation_jobs WHERE status = 'generating') AS generating,
       (SELECT count(*) FROM generation_jobs WHERE status = 'completed') AS completed,
       (SELECT count(*) FROM generation_jobs WHERE status = 'failed') AS failed
"""


@pytest.mark.timeout(600)
async def test_generation_and_grading_on_one_worker_neither_waits_for_the_other(
    database_url: str,
    pool: asyncpg.Pool,
    tmp_path: Path,
    grading_workers: Callable[..., Process],
) -> None:
    """A backlog of gradings (seconds of sandboxed runs in the grading prover's two slots) and
    python generations (proofs in the generation prover's slots) arrive together: jobs are made
    and completed while gradings still wait, and gradings end while jobs generate."""
    keys = await create_keys(database_url)
    await stock(pool)
    settings = {"WARMPOOL_TICK_SECONDS": "0.5", "WARMPOOL_REQUEST_TIMEOUT_SECONDS": "30"}
    overrides = {"WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)), **settings}
    samples: list[asyncpg.Record] = []
    with running_server(database_url, tmp_path, overrides=overrides, ready_within=120) as url:
        grading_workers(**settings)
        await graders_ready(pool)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            app = keys["candidate_app"]
            instances = [await serve(client, app, f"candidate-{number}") for number in range(12)]
            for instance in instances:
                answer = await submit(
                    client, app, instance["id"], {"pricing.py": HARD_CODED}, instance["id"]
                )
                assert answer.status_code == 202, answer.text
            for number in range(3):
                answer = await client.post(
                    "/v1/jobs",
                    json={"user_id": f"maker-{number}", "track": "backend-engineer"},
                    headers={"Authorization": f"Bearer {app}", "Idempotency-Key": f"m{number}"},
                )
                assert answer.status_code == 202, answer.text
            async with pool.acquire() as sampler:
                deadline = time.monotonic() + 300
                while not samples or samples[-1]["backlog"] or samples[-1]["generating"]:
                    sample = await sampler.fetchrow(TOGETHER)
                    assert sample is not None, "an aggregate returns one row"
                    samples.append(sample)
                    assert time.monotonic() < deadline, f"still under way: {dict(samples[-1])}"
                    await asyncio.sleep(0.02)
    last = samples[-1]
    assert (last["graded"], last["completed"], last["failed"]) == (12, 3, 0), dict(last)
    assert any(s["grading"] and s["generating"] for s in samples), "never both at once"
    first_made = next(s for s in samples if s["completed"])
    both = sum(bool(s["grading"] and s["generating"]) for s in samples)
    print(
        f"{len(samples)} samples, {both} with both running; at the first job completed, "
        f"{first_made['backlog']} of 12 gradings not yet ended"
    )
    assert first_made["backlog"] > 0, "generation waited until the gradings were done"
    assert any(
        later["graded"] > earlier["graded"] and earlier["generating"] and later["generating"]
        for earlier, later in pairwise(samples)
    ), "no grading ended while jobs were generating"
