"""Admission under real concurrent HTTP requests to a real server process."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import asyncpg
import httpx
import pytest

from server import migrate
from tests.support.postgres import create_database, drop_database
from tests.support.server import create_keys, environment, running_server, spawn

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("standing_worker")]
BODY = {"user_id": "spiky-user", "track": "backend-engineer"}


async def post_many(
    url: str, key: str, bodies_and_keys: list[tuple[dict[str, str], str]]
) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        return await asyncio.gather(
            *(
                client.post(
                    "/v1/jobs",
                    json=body,
                    headers={"Authorization": f"Bearer {key}", "Idempotency-Key": idem},
                )
                for body, idem in bodies_and_keys
            )
        )


async def test_twenty_simultaneous_enqueues_for_one_user_accept_exactly_three(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    keys = await create_keys(database_url)
    with running_server(database_url, tmp_path) as url:
        answers = await post_many(
            url, keys["candidate_app"], [(BODY, f"key-{index}") for index in range(20)]
        )
    assert Counter(answer.status_code for answer in answers) == {202: 3, 429: 17}
    for answer in answers:
        if answer.status_code == 429:
            assert answer.headers["retry-after"].isdigit()
            assert "already has 3 active jobs" in answer.json()["detail"]
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 3


async def test_twenty_simultaneous_requests_with_one_key_create_one_job(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    keys = await create_keys(database_url)
    with running_server(database_url, tmp_path) as url:
        answers = await post_many(url, keys["candidate_app"], [(BODY, "the-one-key")] * 20)
    assert Counter(answer.status_code for answer in answers) == {202: 1, 200: 19}
    assert {answer.json()["job"]["id"] for answer in answers} == {"1"}
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 1


async def test_a_full_queue_sheds_new_work_with_503_and_leaves_in_flight_work_alone(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    keys = await create_keys(database_url)
    await pool.execute(
        """INSERT INTO generation_jobs
               (lane, user_id, domain, status, attempt, fair_time, started_at, heartbeat_at)
           SELECT 'interactive', 'busy-' || n, 'python-backend', 'generating', 1,
                  now(), now(), now()
           FROM generate_series(1, 3) n"""
    )
    with running_server(database_url, tmp_path, overrides={"WARMPOOL_MAX_PENDING": "4"}) as url:
        # One after the other: the depth limit is exact then (concurrent enqueues may
        # overshoot it by at most their number, which the design accepts).
        answers = []
        for index in range(7):
            [answer] = await post_many(
                url,
                keys["candidate_app"],
                [({"user_id": f"user-{index}", "track": "backend-engineer"}, f"k{index}")],
            )
            answers.append(answer.status_code)
            if answer.status_code == 503:
                assert answer.headers["retry-after"].isdigit()
                assert "queue is full (4 pending jobs, limit 4)" in answer.json()["detail"]
    assert answers == [202, 202, 202, 202, 503, 503, 503]
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE status = 'generating'") == 3
    )
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE status = 'pending'") == 4


async def test_processes_starting_together_apply_each_migration_exactly_once(
    postgres_server: str, tmp_path: Path
) -> None:
    name, url = await create_database(postgres_server, "template0")
    try:
        processes = [
            spawn(
                [sys.executable, "-m", "server", "migrate"],
                environment(url),
                tmp_path / f"migrate-{index}.log",
            )
            for index in range(4)
        ]
        assert [process.popen.wait(60) for process in processes] == [0, 0, 0, 0]
        connection = await asyncpg.connect(url)
        try:
            versions = await connection.fetch(
                "SELECT version FROM schema_migrations ORDER BY version"
            )
        finally:
            await connection.close()
        assert [row["version"] for row in versions] == list(range(1, migrate.LATEST_VERSION + 1))
        outputs = [process.output() for process in processes]
        assert sum(f"{len(versions)} migration(s) applied" in output for output in outputs) == 1
    finally:
        await drop_database(postgres_server, name)
