"""Grading across several real `warmpool worker` processes behind one API process: the grading
cap sampled from the table, the per-user cap, exactly one grading per submission and key, a
worker killed mid-grading whose grading another worker takes back and finishes, and grading
and generation on one worker, neither waiting for the other's backlog."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from qa import processes
from tests.support.grading import (
    HARD_CODED,
    domain_map,
    graders_ready,
    serve,
    slot_uids,
    stock,
    submit,
)
from tests.support.polling import eventually
from tests.support.proving import ensure_toolchain
from tests.support.server import Process, create_keys, environment, running_server, spawn

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


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


# Sampled together: gradings running, ended, and the most a user has pending or running.
IN_FLIGHT = """
SELECT count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status IN ('passed', 'failed', 'error')) AS done,
       (SELECT coalesce(max(active), 0) FROM (
            SELECT count(*) AS active FROM submissions
            WHERE status IN ('pending', 'running') GROUP BY user_id
        ) per_user) AS per_user
FROM submissions
"""


def refused_over_the_user_cap_and_one_submission_per_key(
    answers: list[list[httpx.Response]],
) -> None:
    """Each user's answers: 202, 200 for a key seen, 429 with Retry-After over the user cap;
    the first ten users' first and last sends share a key."""
    statuses = Counter(answer.status_code for sent in answers for answer in sent)
    assert set(statuses) <= {202, 200, 429}, [a.text for s in answers for a in s]
    assert statuses[429] > 0, "no user was ever over the user cap"
    for sent in answers:
        for refused in (answer for answer in sent if answer.status_code == 429):
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.headers["retry-after"].isdigit()
            assert "already has 2 submissions pending or running" in refused.json()["detail"]
    for twins in (sent[::3] for sent in answers[:10]):
        ids = {answer.json()["submission"]["id"] for answer in twins if answer.status_code < 300}
        assert len(ids) <= 1, "one key, one submission"
        assert [answer.status_code for answer in twins].count(202) <= 1


# 200 sandboxed runs on two cores: minutes, not the suite's default two.
@pytest.mark.timeout(900)
async def test_100_submissions_of_50_users_under_a_grading_cap_of_3(
    database_url: str,
    pool: asyncpg.Pool,
    tmp_path: Path,
    grading_workers: Callable[..., Process],
) -> None:
    """Each user sends three submissions at once, over the user cap of 2, and ten of them the
    first one twice, under one key, at the same moment."""
    keys = await create_keys(database_url)
    await stock(pool)
    settings = {
        "WARMPOOL_GRADING_CAP": "3",
        "WARMPOOL_GRADING_USER_CAP": "2",
        "WARMPOOL_TICK_SECONDS": "0.5",
        "WARMPOOL_REQUEST_TIMEOUT_SECONDS": "30",
    }
    overrides = {"WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)), **settings}
    samples: list[asyncpg.Record] = []
    sampling = True

    async def sample() -> None:
        async with pool.acquire() as sampler:
            while sampling:
                found = await sampler.fetchrow(IN_FLIGHT)
                assert found is not None, "an aggregate returns one row"
                samples.append(found)
                await asyncio.sleep(0.005)

    with running_server(database_url, tmp_path, overrides=overrides, ready_within=120) as url:
        for _ in range(3):  # two grading slots each: six slots for a cap of three
            grading_workers(**settings)
        await graders_ready(pool, count=3)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            app = keys["candidate_app"]
            users = [f"candidate-{number}" for number in range(50)]
            instances = [await serve(client, app, user) for user in users]
            # Four users' requests under way at a time: each user's all at once.
            turns = asyncio.Semaphore(4)

            async def send_all(number: int, instance: dict[str, Any]) -> list[httpx.Response]:
                sends = [
                    (f"{instance['id']}-{attempt}", HARD_CODED + f"# try {attempt}\n")
                    for attempt in range(3)
                ]
                if number < 10:
                    sends.append(sends[0])  # the same key and body, at the same moment
                async with turns:
                    return await asyncio.gather(
                        *(
                            submit(client, app, instance["id"], {"pricing.py": code}, key)
                            for key, code in sends
                        )
                    )

            sampler = asyncio.create_task(sample())
            try:
                answers = await asyncio.gather(*map(send_all, itertools.count(), instances))
                made = [
                    answer.json()["submission"]["id"]
                    for sent in answers
                    for answer in sent
                    if answer.status_code == 202
                ]

                async def every_one_graded() -> bool:
                    return bool(samples) and samples[-1]["done"] >= len(made)

                await eventually(every_one_graded, 600, f"{len(made)} submissions graded")
            finally:
                sampling = False
                await sampler

    refused_over_the_user_cap_and_one_submission_per_key(answers)
    assert len(set(made)) == len(made)

    highest = max(found["running"] for found in samples)
    highest_per_user = max(found["per_user"] for found in samples)
    print(f"{len(samples)} samples: running at most {highest}, a user at most {highest_per_user}")
    assert 0 < highest <= 3
    assert highest_per_user == 2, "the user cap held, and was reached"
    rows = await pool.fetch("SELECT status, attempt, worker_id, hidden_total FROM submissions")
    assert len(rows) == len(made) >= 100
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
    # Five seconds: the survivor's heartbeats must never lag that long on a loaded machine, or
    # its own grading is taken back too, a third attempt.
    settings = {"WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS": "5", "WARMPOOL_TICK_SECONDS": "0.5"}
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


# Sampled with the sandboxes' processes: gradings not yet ended, and ended; the test's jobs
# generating, and completed or failed. Only the test's own: the missions they make are served
# 100 times each, so the replenisher renders their bugs meanwhile, on and on.
TOGETHER = """
SELECT (SELECT count(*) FROM submissions WHERE status IN ('pending', 'running')) AS backlog,
       (SELECT count(*) FROM submissions WHERE status IN ('passed', 'failed', 'error'))
           AS graded,
       (SELECT count(*) FROM generation_jobs
        WHERE lane = 'interactive' AND status IN ('pending', 'generating')) AS generating,
       (SELECT count(*) FROM generation_jobs
        WHERE lane = 'interactive' AND status = 'completed') AS completed,
       (SELECT count(*) FROM generation_jobs
        WHERE lane = 'interactive' AND status = 'failed') AS failed
"""


@dataclass(frozen=True)
class Together:
    """One moment: the table's counts, and which sandboxes had a run under way."""

    counts: asyncpg.Record
    grading: bool  # the grading prover's slot had a process
    proving: bool  # the generation prover's slot had a process


JOBS = 6
# Ten slow gradings outlast the jobs by a margin wide enough for a loaded machine's pace.
GRADINGS = 10


@pytest.mark.timeout(600)
async def test_generation_and_grading_on_one_worker_neither_waits_for_the_other(
    database_url: str,
    pool: asyncpg.Pool,
    tmp_path: Path,
    grading_workers: Callable[..., Process],
) -> None:
    """One proof slot each, and a backlog of slow gradings (seconds each) that keeps grading's
    slot busy: with one shared queue, a generation's proof would wait for a grading to end,
    and the two sandboxes would never run at once. Here each keeps its share: generation's
    proofs run in their own slot while grading's is busy, every job is made while gradings
    still wait, and gradings end while generation is under way (its jobs, proofs included,
    outlast a grading or two)."""
    keys = await create_keys(database_url)
    await stock(pool)
    settings = {
        "WARMPOOL_PROOF_SLOTS": "1",
        "WARMPOOL_TICK_SECONDS": "0.5",
        "WARMPOOL_REQUEST_TIMEOUT_SECONDS": "30",
    }
    slow = HARD_CODED.replace("def total(", "__import__('time').sleep(1)\n\n\ndef total(")
    overrides = {"WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)), **settings}
    samples: list[Together] = []
    with running_server(database_url, tmp_path, overrides=overrides, ready_within=120) as url:
        worker = grading_workers(**settings)
        await graders_ready(pool)
        [grading_uid] = slot_uids(worker.log, "grading")
        [proving_uid] = slot_uids(worker.log, "generation")
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            app = keys["candidate_app"]
            instances = [
                await serve(client, app, f"candidate-{number}") for number in range(GRADINGS)
            ]
            for instance in instances:
                answer = await submit(
                    client, app, instance["id"], {"pricing.py": slow}, instance["id"]
                )
                assert answer.status_code == 202, answer.text
            for number in range(JOBS):
                answer = await client.post(
                    "/v1/jobs",
                    json={"user_id": f"maker-{number}", "track": "backend-engineer"},
                    headers={"Authorization": f"Bearer {app}", "Idempotency-Key": f"m{number}"},
                )
                assert answer.status_code == 202, answer.text
            async with pool.acquire() as sampler:
                deadline = time.monotonic() + 300
                while (
                    not samples or samples[-1].counts["backlog"] or samples[-1].counts["generating"]
                ):
                    counts = await sampler.fetchrow(TOGETHER)
                    assert counts is not None, "an aggregate returns one row"
                    samples.append(
                        Together(
                            counts,
                            grading=bool(processes.living(grading_uid)),
                            proving=bool(processes.living(proving_uid)),
                        )
                    )
                    assert time.monotonic() < deadline, f"still under way: {dict(counts)}"
                    await asyncio.sleep(0.02)
    last = samples[-1].counts
    assert (last["graded"], last["completed"], last["failed"]) == (GRADINGS, JOBS, 0), dict(last)
    both = sum(sample.grading and sample.proving for sample in samples)
    made = next(sample for sample in samples if sample.counts["completed"] == JOBS)
    print(
        f"{len(samples)} samples, {both} with both sandboxes running; when the last job was "
        f"made, {made.counts['backlog']} of {GRADINGS} gradings not yet ended"
    )
    assert both, "the two sandboxes never ran at once: one waited for the other's slot"
    assert made.counts["backlog"] > 0, "generation waited until the gradings were done"
    assert any(
        later.counts["graded"] > earlier.counts["graded"]
        and earlier.counts["generating"]
        and later.counts["generating"]
        and (earlier.proving or later.proving)
        for earlier, later in pairwise(samples)
    ), "no grading ended while generation was under way"
