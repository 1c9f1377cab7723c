"""Candidate apps cannot touch the pool's own work, every job and instance records the key that
made it, and under WARMPOOL_CANDIDATE_KEY_SCOPE=own a candidate key sees only its own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from pool import waiting
from server.app import create_app
from server.auth import Role, create_key
from server.settings import Settings
from tests.support.http import bearer
from tests.support.jobs import enqueue
from tests.support.missions import add_mission
from tests.support.server import key_id

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

BODY = {"user_id": "alice", "track": "backend-engineer"}
# Served from stock: another user (alice, whose job is under way, is answered with her job).
SERVED = {"user_id": "carol", "track": "backend-engineer"}


async def test_a_candidate_key_cannot_cancel_the_pools_own_jobs(
    pool: asyncpg.Pool, client: AsyncTestClient[Litestar], keys: dict[Role, str]
) -> None:
    job = await enqueue(pool, None)  # the replenish lane
    answer = await client.delete(f"/v1/jobs/{job}", headers=bearer(keys["candidate_app"]))
    assert answer.status_code == 403, answer.text
    assert "only an admin key" in answer.json()["detail"]
    assert await pool.fetchval("SELECT status FROM generation_jobs WHERE id = $1", job) == "pending"
    answer = await client.delete(f"/v1/jobs/{job}", headers=bearer(keys["admin"]))
    assert (answer.status_code, answer.json()["status"]) == (200, "cancelled")


async def test_jobs_and_instances_record_the_key_that_made_them(
    pool: asyncpg.Pool, client: AsyncTestClient[Litestar], keys: dict[Role, str]
) -> None:
    app = await key_id(pool, "candidate_app")
    headers = {**bearer(keys["candidate_app"]), "Idempotency-Key": "k"}
    job = (await client.post("/v1/jobs", json=BODY, headers=headers)).json()["job"]
    await add_mission(pool)
    served = await client.post("/v1/serve", json=SERVED, headers=bearer(keys["candidate_app"]))
    instance = served.json()["instance"]
    assert (
        await pool.fetchval("SELECT created_by FROM generation_jobs WHERE id = $1", int(job["id"]))
        == app
    )
    assert (
        await pool.fetchval(
            "SELECT created_by FROM mission_instances WHERE id = $1", int(instance["id"])
        )
        == app
    )
    # The instance a waiting user gets once their job's mission is approved is the job's key's.
    mission = await add_mission(pool, qa_status="approved")
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute(
            "UPDATE generation_jobs SET user_id = 'bob', status = 'awaiting_review', "
            "mission_id = $2 WHERE id = $1",
            int(job["id"]),
            mission,
        )
        waited = await waiting.serve_waiting_user(connection, mission, int(job["id"]))
    assert waited is not None
    assert await pool.fetchval(
        "SELECT (user_id, created_by) FROM mission_instances WHERE id = $1", waited
    ) == ("bob", app)
    # The pool's own work is made by no key.
    replenish = await enqueue(pool, None)
    assert (
        await pool.fetchval("SELECT created_by FROM generation_jobs WHERE id = $1", replenish)
        is None
    )


@pytest.fixture
async def own_scope(settings: Settings) -> AsyncIterator[AsyncTestClient[Litestar]]:
    app = create_app(msgspec.structs.replace(settings, candidate_key_scope="own"))
    async with AsyncTestClient(app, base_url="https://testserver.local") as client:
        yield client


async def test_under_own_scope_a_candidate_key_sees_only_what_it_made(
    pool: asyncpg.Pool,
    own_scope: AsyncTestClient[Litestar],
    keys: dict[Role, str],
    database_url: str,
) -> None:
    connection = await asyncpg.connect(database_url)
    try:
        other = await create_key(connection, "candidate_app", "another app")
    finally:
        await connection.close()
    mine, theirs = bearer(keys["candidate_app"]), bearer(other)
    job = (
        await own_scope.post("/v1/jobs", json=BODY, headers={**mine, "Idempotency-Key": "k"})
    ).json()["job"]["id"]
    await add_mission(pool)
    instance = (await own_scope.post("/v1/serve", json=SERVED, headers=mine)).json()["instance"]

    for path in (f"/v1/jobs/{job}", f"/v1/instances/{instance['id']}"):
        assert (await own_scope.get(path, headers=mine)).status_code == 200
        assert (await own_scope.get(path, headers=theirs)).status_code == 404
        assert (await own_scope.get(path, headers=bearer(keys["admin"]))).status_code == 200
    listed = "/v1/users/carol/instances"
    assert [i["id"] for i in (await own_scope.get(listed, headers=mine)).json()["instances"]] == [
        instance["id"]
    ]
    assert (await own_scope.get(listed, headers=theirs)).json()["instances"] == []
    assert (await own_scope.delete(f"/v1/jobs/{job}", headers=theirs)).status_code == 404
    cancelled = await own_scope.delete(f"/v1/jobs/{job}", headers=mine)
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
