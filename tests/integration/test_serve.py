"""POST /v1/serve and the instances: the contract, the domain guard, idempotency, and the
queue's refusals when a serve has to enqueue."""

import asyncio
from typing import Any

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from core import domains, idempotency
from generation.admission import RETRY_AFTER_SECONDS
from pool import requests, serving
from pool.guard import allowed_domains
from server.auth import Role
from server.database import create_pool
from server.routes.common import UserTrack
from server.settings import Settings
from tests.support.http import assert_problem, bearer
from tests.support.jobs import LIMITS, enqueue, job_count
from tests.support.missions import add_mission
from tests.support.server import ROOT

Client = AsyncTestClient[Litestar]
BACKEND = {"user_id": "ada", "track": "backend-engineer"}
HEARTBEAT_TIMEOUT = Settings().heartbeat_timeout
# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")


async def serve(
    client: Client, keys: dict[Role, str], body: dict[str, Any], key: str | None = None
) -> Any:
    headers = bearer(keys["candidate_app"]) | ({"Idempotency-Key": key} if key else {})
    return await client.post("/v1/serve", json=body, headers=headers)


async def test_a_serve_answers_an_instance_without_gold_or_bug_summary(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    mission = await add_mission(pool, "python-backend")
    answer = await serve(client, keys, BACKEND)
    assert answer.status_code == 200, answer.text
    instance = answer.json()["instance"]
    assert set(instance) == {
        "id",
        "mission_id",
        "variant_id",
        "user_id",
        "cohort",
        "track",
        "domain",
        "language",
        "title",
        "brief",
        "files",
        "serve_number",
        "created_at",
    }
    assert instance["mission_id"] == str(mission)
    assert (instance["user_id"], instance["track"], instance["serve_number"]) == (
        "ada",
        "backend-engineer",
        1,
    )
    assert instance["files"] == {
        "solution.py": "GOLD = False\n",
        "test_solution.py": "def test_it(): pass\n",
    }
    assert "the secret bug" not in answer.text
    assert "GOLD = True" not in answer.text

    read = await client.get(
        f"/v1/instances/{instance['id']}", headers=bearer(keys["candidate_app"])
    )
    assert read.json() == instance
    assert await pool.fetchval("SELECT serve_count FROM missions WHERE id = $1", mission) == 1


async def test_least_served_first_never_the_same_mission_twice_then_a_job(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    first, second = await add_mission(pool), await add_mission(pool)
    await pool.execute("UPDATE missions SET serve_count = 3 WHERE id = $1", first)
    served = [(await serve(client, keys, BACKEND)).json() for _ in range(3)]
    assert served[0]["instance"]["mission_id"] == str(second), "the least-served first"
    assert served[1]["instance"]["mission_id"] == str(first), "ada already has the other one"
    assert served[2]["job"]["status"] == "pending", "ada has both: a generation for her"
    assert served[2]["job"]["lane"] == "interactive"
    listed = (
        await client.get("/v1/users/ada/instances", headers=bearer(keys["candidate_app"]))
    ).json()
    assert [i["mission_id"] for i in listed["instances"]] == [str(first), str(second)], (
        "newest first"
    )


async def test_the_domain_guard_and_what_is_never_served(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    await add_mission(pool, "marketing-copy")
    await add_mission(pool, "python-backend", qa_status="awaiting_review")
    await add_mission(pool, "python-backend", qa_status="rejected")
    await add_mission(pool, "python-backend", retired=True)
    answer = await serve(client, keys, BACKEND)
    assert answer.status_code == 202, "nothing servable to an engineer: a job instead"
    assert answer.json()["job"]["domain"] in {"python-backend", "sql-data"}
    marketing = await serve(client, keys, {"user_id": "mia", "track": "marketing-manager"})
    assert marketing.json()["instance"]["domain"] == "marketing-copy"


async def test_a_mission_retires_on_its_last_serve(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    mission = await add_mission(pool, max_serves=2)
    for user in ("a", "b"):
        assert (
            await serve(client, keys, {"user_id": user, "track": "backend-engineer"})
        ).status_code == 200
    row = await pool.fetchrow(
        "SELECT serve_count, retired_at, retire_reason FROM missions WHERE id = $1", mission
    )
    assert row is not None
    assert row["serve_count"] == 2
    assert row["retired_at"] is not None
    assert row["retire_reason"] == "served 2 times"
    assert (
        await serve(client, keys, {"user_id": "c", "track": "backend-engineer"})
    ).status_code == 202


async def test_a_waiting_user_who_has_the_mission_already_is_not_counted_again(
    pool: asyncpg.Pool,
) -> None:
    """A serve count is the mission's instances: the serves ever made are summed from them."""
    mission = await add_mission(pool, max_serves=10)
    job = await enqueue(pool, "ada")
    async with pool.acquire() as connection, connection.transaction():
        served = [
            await serving.serve_to_waiting_user(connection, mission_id=mission, job_id=job)
            for _ in range(2)
        ]
    assert [instance is not None for instance in served] == [True, False]
    row = await pool.fetchrow(
        "SELECT serve_count, (SELECT count(*) FROM mission_instances WHERE mission_id = $1)"
        " AS instances FROM missions WHERE id = $1",
        mission,
    )
    assert row is not None
    assert (row["serve_count"], row["instances"]) == (1, 1)


async def test_a_repeated_serve_with_one_key_answers_the_first_instance(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    await add_mission(pool)
    await add_mission(pool)
    first = await serve(client, keys, BACKEND, key="serve-1")
    again = await serve(client, keys, BACKEND, key="serve-1")
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json()
    assert await pool.fetchval("SELECT count(*) FROM mission_instances") == 1
    other = await serve(client, keys, BACKEND | {"user_id": "bob"}, key="serve-1")
    assert_problem(other, 409, "already used")


async def test_a_repeated_serve_that_enqueued_answers_the_same_job(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    first = await serve(client, keys, BACKEND, key="k")
    again = await serve(client, keys, BACKEND, key="k")
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["job"]["id"] == first.json()["job"]["id"]
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 1


async def test_bad_serves(client: Client, keys: dict[Role, str], pool: asyncpg.Pool) -> None:
    assert_problem(
        await serve(client, keys, {"user_id": "a", "track": "pilot"}), 422, "valid tracks"
    )
    assert_problem(
        await serve(client, keys, {"user_id": "", "track": "backend-engineer"}), 422, "empty"
    )
    assert_problem(
        await serve(client, keys, {"user_id": "a" * 201, "track": "backend-engineer"}), 422, "200"
    )
    assert_problem(
        await serve(client, keys, {"user_id": "a\x00", "track": "backend-engineer"}), 422, "NUL"
    )
    assert_problem(await serve(client, keys, {"user_id": "a"}), 400, "track")
    nobody = await client.get("/v1/users/a%00/instances", headers=bearer(keys["candidate_app"]))
    assert nobody.json() == {"instances": []}, "no user id holds a NUL"
    reviewer = await client.post("/v1/serve", json=BACKEND, headers=bearer(keys["qa_reviewer"]))
    assert_problem(reviewer, 403, "candidate_app")
    for missing in ("/v1/instances/12345", "/v1/instances/abc"):
        assert_problem(
            await client.get(missing, headers=bearer(keys["candidate_app"])), 404, "no instance"
        )
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 0
    assert await pool.fetchval("SELECT count(*) FROM mission_instances") == 0


async def what_a_serve_leaves(pool: asyncpg.Pool) -> tuple[int, int, int]:
    """Jobs, instances and remembered Idempotency-Keys: a refused serve adds none of them."""
    return (
        await job_count(pool),
        await pool.fetchval("SELECT count(*) FROM mission_instances"),
        await pool.fetchval("SELECT count(*) FROM idempotency_keys"),
    )


async def test_a_serve_over_the_users_active_job_cap_is_429_and_creates_nothing(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    # Three active jobs of ada's on other tracks (a serve of one track answers with the job
    # under way for it instead of enqueueing another).
    headers = bearer(keys["candidate_app"])
    for number, track in enumerate(["frontend-engineer", "frontend-engineer", "marketing-manager"]):
        enqueued = await client.post(
            "/v1/jobs",
            json={"user_id": "ada", "track": track},
            headers=headers | {"Idempotency-Key": f"other-track-{number}"},
        )
        assert enqueued.status_code == 202, enqueued.text
    before = await what_a_serve_leaves(pool)
    refused = await serve(client, keys, BACKEND, key="a-fourth")
    assert_problem(refused, 429, "'ada' already has 3 active jobs", "cancel a pending one")
    assert refused.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
    assert await what_a_serve_leaves(pool) == before
    other = await serve(client, keys, BACKEND | {"user_id": "bob"})
    assert other.status_code == 202, "the cap is per user"


async def test_a_serve_with_the_queue_at_its_depth_limit_is_503_and_creates_nothing(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, settings: Settings
) -> None:
    for index in range(settings.max_pending - 1):
        await enqueue(pool, f"queued-{index}")
    last_place = await serve(client, keys, BACKEND | {"user_id": "bob"})
    assert last_place.status_code == 202, "one below the limit: the serve takes the last place"
    before = await what_a_serve_leaves(pool)
    assert before[0] == settings.max_pending
    shed = await serve(client, keys, BACKEND, key="full")
    assert_problem(shed, 503, "queue is full", f"limit {settings.max_pending}")
    assert shed.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
    assert await what_a_serve_leaves(pool) == before


def user_request(key: str | None, key_id: int = 1) -> requests.UserRequest:
    """What POST /v1/serve asks for ada under the Idempotency-Key `key` (None: without one)."""
    body = UserTrack(user_id=BACKEND["user_id"], track=BACKEND["track"])
    return requests.UserRequest(
        user_id=body.user_id,
        track=body.track,
        domains=allowed_domains(domains.load(ROOT / "domain_map.yaml"), body.track),
        key_id=key_id,
        caller=f"key:{key_id}",
        idempotency_key=key,
        fingerprint=idempotency.fingerprint("POST /v1/serve", body),
    )


async def test_a_serve_without_a_key_is_one_statement_and_with_one_a_transaction(
    database_url: str, pool: asyncpg.Pool
) -> None:
    for _ in range(3):
        await add_mission(pool, "python-backend")
    sent: list[str] = []

    class Logged(asyncpg.Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.add_query_logger(lambda record: sent.append(record.query))

    logged = await create_pool(database_url, max_size=1, connection_class=Logged)

    async def serve_ada(key: str | None) -> requests.Answer:
        return await requests.serve_or_enqueue(
            logged, user_request(key), limits=LIMITS, heartbeat_timeout=HEARTBEAT_TIMEOUT
        )

    try:
        # The first serve on the connection also reads the types of the statement's answer.
        assert (await serve_ada(None)).instance is not None
        sent.clear()
        assert (await serve_ada(None)).instance is not None
        assert sent == [serving.queries["pool_serve_round"]], "no BEGIN, no COMMIT"
        sent.clear()
        assert (await serve_ada("keyed")).instance is not None
        assert sent == [
            "BEGIN;",
            idempotency.queries["idempotency_claim"],
            serving.queries["pool_serve_round"],
            idempotency.queries["idempotency_remember"],
            "COMMIT;",
        ], "the key claimed and remembered in the serve's transaction"
    finally:
        await logged.close()


async def test_a_user_who_asks_again_meanwhile_gets_the_job_under_way(
    pool: asyncpg.Pool, client: Client, keys: dict[Role, str]
) -> None:
    # Three clicks at once, each with its own key, from three connections.
    answers = await asyncio.gather(
        *(
            requests.serve_or_enqueue(
                pool,
                user_request(f"click-{n}"),
                limits=LIMITS,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
            )
            for n in range(3)
        )
    )
    # Three more, one after another, over HTTP.
    answers_over_http = [await serve(client, keys, BACKEND, key=f"again-{n}") for n in range(3)]
    assert await job_count(pool) == 1, "one generation, however often the user asked"
    [job] = {answer.job.id for answer in answers if answer.job is not None}
    assert all(answer.instance is None for answer in answers)
    assert [answer.status_code for answer in answers_over_http] == [202] * 3
    assert {answer.json()["job"]["id"] for answer in answers_over_http} == {str(job)}
    # Stock that arrives meanwhile is served at once, and still no second job is made.
    await add_mission(pool, "python-backend")
    assert (await serve(client, keys, BACKEND, key="stocked")).status_code == 200
    assert await job_count(pool) == 1
    # POST /v1/jobs keeps its meaning: a generation of its own.
    headers = bearer(keys["candidate_app"]) | {"Idempotency-Key": "explicit"}
    explicit = await client.post("/v1/jobs", json=BACKEND, headers=headers)
    assert explicit.status_code == 202
    assert explicit.json()["job"]["id"] != job
