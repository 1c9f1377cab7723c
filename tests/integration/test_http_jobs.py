"""The jobs routes over HTTP: the contract, auth, and bad input that creates nothing."""

from typing import Any

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.auth import Role
from tests.support.http import assert_problem, bearer
from tests.support.jobs import job_count

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

Client = AsyncTestClient[Litestar]
BODY = {"user_id": "u-1", "track": "backend-engineer"}


async def test_enqueue_read_and_cancel(client: Client, keys: dict[Role, str]) -> None:
    headers = bearer(keys["candidate_app"]) | {"Idempotency-Key": "first"}
    created = await client.post("/v1/jobs", json=BODY, headers=headers)
    assert created.status_code == 202, created.text
    job = created.json()["job"]
    assert job["status"] == "pending"
    assert job["lane"] == "interactive"
    assert job["user_id"] == "u-1"
    assert job["domain"] in {"python-backend", "sql-data"}
    assert job["queue_position"] == 0
    assert job["attempt"] == 0
    assert job["spend"] == {
        "llm_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "resumed_calls": 0,
        "saved_usd": 0.0,
    }
    assert job["created_at"].endswith("Z")

    again = await client.post(
        "/v1/jobs", json={"track": "backend-engineer", "user_id": "u-1"}, headers=headers
    )
    assert again.status_code == 200, "same key, same body (any key order): the first answer"
    assert again.json()["job"]["id"] == job["id"]

    read = await client.get(f"/v1/jobs/{job['id']}", headers=bearer(keys["candidate_app"]))
    assert read.status_code == 200
    assert read.json()["id"] == job["id"]

    cancelled = await client.delete(f"/v1/jobs/{job['id']}", headers=bearer(keys["candidate_app"]))
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    twice = await client.delete(f"/v1/jobs/{job['id']}", headers=bearer(keys["candidate_app"]))
    assert_problem(twice, 409, "cancelled", "only a pending job")


async def test_a_reused_key_with_another_body_is_a_conflict(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    headers = bearer(keys["candidate_app"]) | {"Idempotency-Key": "k"}
    assert (await client.post("/v1/jobs", json=BODY, headers=headers)).status_code == 202
    other = await client.post("/v1/jobs", json=BODY | {"user_id": "u-2"}, headers=headers)
    assert_problem(other, 409, "Idempotency-Key 'k' was already used")
    assert await job_count(pool) == 1


async def test_keys_are_scoped_to_the_caller(client: Client, keys: dict[Role, str]) -> None:
    first = await client.post(
        "/v1/jobs", json=BODY, headers=bearer(keys["candidate_app"]) | {"Idempotency-Key": "same"}
    )
    second = await client.post(
        "/v1/jobs", json=BODY, headers=bearer(keys["admin"]) | {"Idempotency-Key": "same"}
    )
    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["job"]["id"] != second.json()["job"]["id"]


BAD_REQUESTS: list[tuple[str, dict[str, str] | None, Any, int, str]] = [
    ("no idempotency key", None, BODY, 400, "needs an Idempotency-Key"),
    ("empty idempotency key", {"Idempotency-Key": ""}, BODY, 422, "1 to 200 printable ASCII"),
    ("long idempotency key", {"Idempotency-Key": "k" * 201}, BODY, 422, "1 to 200 printable ASCII"),
    (
        "unknown track",
        {"Idempotency-Key": "a"},
        BODY | {"track": "astronaut"},
        422,
        "valid tracks: backend-engineer",
    ),
    ("empty user", {"Idempotency-Key": "a"}, BODY | {"user_id": ""}, 422, "user_id is empty"),
    ("blank user", {"Idempotency-Key": "a"}, BODY | {"user_id": "   "}, 422, "user_id is empty"),
    ("long user", {"Idempotency-Key": "a"}, BODY | {"user_id": "u" * 201}, 422, "the limit is 200"),
    ("NUL in user", {"Idempotency-Key": "a"}, BODY | {"user_id": "u\x00"}, 422, "NUL character"),
    ("missing field", {"Idempotency-Key": "a"}, {"user_id": "u"}, 400, "track"),
    (
        "wrong type",
        {"Idempotency-Key": "a"},
        {"user_id": 5, "track": "backend-engineer"},
        400,
        "user_id",
    ),
    ("unknown field", {"Idempotency-Key": "a"}, BODY | {"priority": 9}, 400, "priority"),
    ("not an object", {"Idempotency-Key": "a"}, [1, 2], 400, "could not be read"),
]


@pytest.mark.parametrize(
    ("headers", "body", "status", "detail"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
async def test_bad_input_gets_a_problem_and_creates_nothing(
    client: Client,
    keys: dict[Role, str],
    pool: asyncpg.Pool,
    headers: dict[str, str] | None,
    body: Any,
    status: int,
    detail: str,
) -> None:
    response = await client.post(
        "/v1/jobs", json=body, headers=bearer(keys["candidate_app"]) | (headers or {})
    )
    assert_problem(response, status, detail)
    assert await job_count(pool) == 0


async def test_malformed_json_is_a_400(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    response = await client.post(
        "/v1/jobs",
        content=b'{"user_id": "u"',
        headers=bearer(keys["candidate_app"])
        | {"Idempotency-Key": "a", "Content-Type": "application/json"},
    )
    assert_problem(response, 400, "could not be read")
    assert await job_count(pool) == 0


@pytest.mark.parametrize("job_id", ["999", "abc", "0", "1" * 40, "-1"])
async def test_unknown_jobs_are_404(client: Client, keys: dict[Role, str], job_id: str) -> None:
    for method in ("GET", "DELETE"):
        response = await client.request(
            method, f"/v1/jobs/{job_id}", headers=bearer(keys["candidate_app"])
        )
        assert_problem(response, 404, "there is no job")


async def test_auth_401_and_403(client: Client, keys: dict[Role, str], pool: asyncpg.Pool) -> None:
    headers = {"Idempotency-Key": "a"}
    assert_problem(
        await client.post("/v1/jobs", json=BODY, headers=headers), 401, "Authorization: Bearer"
    )
    unknown = await client.post("/v1/jobs", json=BODY, headers=headers | bearer("wp_nope"))
    assert_problem(unknown, 401, "not known")
    assert unknown.headers["www-authenticate"] == "Bearer"
    basic = await client.post(
        "/v1/jobs", json=BODY, headers=headers | {"Authorization": "Basic eDp5"}
    )
    assert_problem(basic, 401)
    reviewer = await client.post(
        "/v1/jobs", json=BODY, headers=headers | bearer(keys["qa_reviewer"])
    )
    assert_problem(reviewer, 403, "'candidate_app'", "'qa_reviewer'")
    admin_only = await client.get("/v1/queue", headers=bearer(keys["candidate_app"]))
    assert_problem(admin_only, 403, "'admin'")
    assert await job_count(pool) == 0


async def test_unknown_route_and_wrong_method(client: Client, keys: dict[Role, str]) -> None:
    assert_problem(await client.get("/v1/nothing-here"), 404, "/schema/openapi.json")
    wrong = await client.put("/v1/jobs/1", headers=bearer(keys["admin"]))
    assert_problem(wrong, 405, "PUT is not allowed", "GET")


async def test_health_readiness_queue_and_schema(client: Client, keys: dict[Role, str]) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json()["status"] == "ready"
    queue = (await client.get("/v1/queue", headers=bearer(keys["admin"]))).json()
    assert queue["pending"] == 0
    assert queue["global_cap"] == 40
    assert set(queue["lanes"]) == {"interactive", "replenish"}
    schema = (await client.get("/schema/openapi.json")).json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/queue", "/healthz", "/readyz"} <= set(
        schema["paths"]
    )
