"""Database outages, with real processes on a PostgreSQL of the tests' own: while it is down or
frozen, the API answers 503 problem details at once (never a hang, never a 500), /readyz says
503 and /healthz 200, workers stay up and claim nothing; once it is back, requests and claims
resume by themselves."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from server.database import CONNECT_TIMEOUT_SECONDS
from tests.support.polling import eventually
from tests.support.private_postgres import PrivatePostgres
from tests.support.server import Process, create_keys, environment, running_server, spawn
from tests.support.worker_process import RUNS_TABLE

pytestmark = pytest.mark.slow
PROBLEM_JSON = "application/problem+json"


@pytest.fixture
async def outage_url(private_postgres: PrivatePostgres) -> str:
    """The private server, running, with a fresh warmpool database."""
    if not (private_postgres.data / "postmaster.pid").exists():
        private_postgres.start()
    url = await private_postgres.fresh_database()
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(RUNS_TABLE)
    finally:
        await connection.close()
    return url


def start_worker(url: str, log: Path) -> Process:
    arguments = [sys.executable, "-m", "tests.support.worker_process", "sleep", "0.1", "0.2"]
    return spawn(arguments, environment(url, {"WARMPOOL_TICK_SECONDS": "0.5"}), log)


async def timed(request: httpx.Request, client: httpx.AsyncClient) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = await client.send(request)
    return answer, time.monotonic() - started


def assert_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM_JSON)
    assert answer.headers["retry-after"].isdigit()
    assert answer.json()["status"] == 503


async def ready(worker: Process) -> bool:
    """Once the worker says what it can make, users' generations are enqueued."""
    return "worker ready" in worker.output()


async def completed(client: httpx.AsyncClient, job_id: str) -> bool:
    answer = await client.get(f"/v1/jobs/{job_id}")
    return answer.status_code == 200 and answer.json()["status"] == "completed"


async def test_while_postgres_is_down_requests_get_503_workers_claim_nothing_and_all_resumes(
    private_postgres: PrivatePostgres, outage_url: str, tmp_path: Path
) -> None:
    keys = await create_keys(outage_url)
    worker = start_worker(outage_url, tmp_path / "worker.log")
    try:
        await eventually(lambda: ready(worker), 20, "the worker to start")
        with running_server(outage_url, tmp_path) as url:
            headers = {"Authorization": f"Bearer {keys['admin']}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:

                def enqueue(key: str) -> httpx.Request:
                    return client.build_request(
                        "POST",
                        "/v1/jobs",
                        json={"user_id": f"user-{key}", "track": "backend-engineer"},
                        headers={"Idempotency-Key": key},
                    )

                first = (await client.send(enqueue("before"))).json()["job"]["id"]
                await eventually(lambda: completed(client, first), 15, "the first job to complete")

                private_postgres.stop()
                slowest = 0.0
                for request in (
                    client.build_request("GET", f"/v1/jobs/{first}"),
                    client.build_request("GET", "/v1/queue"),
                    enqueue("during"),
                    client.build_request("GET", "/readyz"),
                ):
                    answer, took = await timed(request, client)
                    assert_unavailable(answer)
                    slowest = max(slowest, took)
                assert (await client.get("/healthz")).status_code == 200

                async def blind_tick() -> bool:
                    return "claim failed, claiming nothing" in worker.output()

                await eventually(blind_tick, 10, "the worker to try a claim while blind")
                assert worker.popen.poll() is None, worker.output()

                private_postgres.start()
                restarted = time.monotonic()

                async def accepted() -> str | None:
                    answer = await client.send(enqueue("after"))
                    return answer.json()["job"]["id"] if answer.status_code == 202 else None

                after = await eventually(accepted, 10, "a request to succeed again")
                recovered = time.monotonic() - restarted
                await eventually(lambda: completed(client, after), 10, "a job claimed again")
                claimed_again = time.monotonic() - restarted
                assert (await client.get("/readyz")).status_code == 200
        print(
            f"slowest 503 while down {slowest * 1000:.0f} ms; after the restart, requests "
            f"answered in {recovered:.2f}s and a new job completed in {claimed_again:.2f}s"
        )
        assert slowest < CONNECT_TIMEOUT_SECONDS, "a refused connection is answered at once"
    finally:
        worker.stop()


async def test_a_frozen_database_gets_503_at_the_request_deadline_then_recovers(
    private_postgres: PrivatePostgres, outage_url: str, tmp_path: Path
) -> None:
    keys = await create_keys(outage_url)
    deadline = 1.0
    overrides = {"WARMPOOL_REQUEST_TIMEOUT_SECONDS": str(deadline)}
    with running_server(outage_url, tmp_path, overrides=overrides) as url:
        headers = {"Authorization": f"Bearer {keys['admin']}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            assert (await client.get("/v1/queue")).status_code == 200

            private_postgres.freeze()
            try:
                frozen = [
                    await timed(client.build_request("GET", path), client)
                    for path in ("/v1/queue", "/v1/pool", "/readyz")
                ]
                healthz = await client.get("/healthz")
            finally:
                private_postgres.thaw()
            for answer, _ in frozen:
                assert_unavailable(answer)
            assert frozen[0][0].json()["title"] == "Request timed out"
            assert healthz.status_code == 200

            async def answered() -> bool:
                return (await client.get("/v1/queue")).status_code == 200

            await eventually(answered, 10, "requests to be answered again")
    slowest = max(took for _, took in frozen)
    print(f"slowest 503 while frozen {slowest:.2f}s (deadline {deadline:g}s)")
    assert slowest < deadline + 1
