"""What the live workers can make, over HTTP: GET /v1/workers, /v1/pool's `enabled` and
`disabled_reasons`, a user's generation enqueued only in a domain some live worker can make,
and the 503 that creates nothing when none of the track's domains can be made."""

from datetime import timedelta
from typing import Any

import asyncpg
from litestar import Litestar
from litestar.testing import AsyncTestClient

from generation.admission import RETRY_AFTER_SECONDS
from generation.registry import Capabilities, Registration
from generation.worker import Worker
from server.auth import Role
from tests.support.fleet import standing_worker
from tests.support.generators import Recording
from tests.support.http import assert_problem, bearer
from tests.support.jobs import job_count
from tests.support.missions import add_mission

Client = AsyncTestClient[Litestar]
# The track's domains in their order: sql-data first, so least stock picks it among equals.
DATA = {"user_id": "ada", "track": "data-engineer"}
FRONTEND = {"user_id": "grace", "track": "frontend-engineer"}
NO_PGTAP = {"sql-data": "pgTAP is not installed in the proof database"}


async def ask(
    client: Client, keys: dict[Role, str], route: str, body: dict[str, str], key: str
) -> Any:
    headers = bearer(keys["candidate_app"]) | {"Idempotency-Key": key}
    return await client.post(route, json=body, headers=headers)


async def idempotency_keys(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("SELECT count(*) FROM idempotency_keys"))


async def test_the_live_workers_with_what_each_can_make(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    worker = Worker(pool, Recording(), name="box-a", capacity=3)
    capabilities = Capabilities(domains=("python-backend", "marketing-copy"), disabled=NO_PGTAP)
    await Registration(
        pool, worker, heartbeat_timeout=timedelta(minutes=1), capabilities=capabilities
    ).take()
    # Silent for longer than the heartbeat timeout: no longer live.
    await pool.execute(
        """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots, domains)
           VALUES ('gone', 'gone:box-b:7', now() - interval '1 hour',
                   now() - interval '61 seconds', 4, '{sql-data}')"""
    )

    answer = await client.get("/v1/workers", headers=bearer(keys["admin"]))

    assert answer.status_code == 200, answer.text
    [shown] = answer.json()["workers"]
    assert set(shown) == {
        "name",
        "started_at",
        "heartbeat_at",
        "domains",
        "disabled",
        "slots",
        "running",
    }
    assert {key: shown[key] for key in ("name", "domains", "disabled", "slots", "running")} == {
        "name": "box-a",
        "domains": ["python-backend", "marketing-copy"],
        "disabled": NO_PGTAP,
        "slots": 3,
        "running": 0,
    }
    assert shown["heartbeat_at"].endswith("Z")
    for role in ("candidate_app", "qa_reviewer"):
        refused = await client.get("/v1/workers", headers=bearer(keys[role]))
        assert_problem(refused, 403)


async def test_the_pool_says_which_domains_a_live_worker_can_make_and_why_not(
    client: Client, keys: dict[Role, str], database_url: str
) -> None:
    admin = bearer(keys["admin"])
    nobody = (await client.get("/v1/pool", headers=admin)).json()["domains"]
    assert {(each["enabled"], str(each["disabled_reasons"])) for each in nobody} == {(False, "[]")}

    await standing_worker(
        database_url, "no-pgtap", domains=["python-backend", "marketing-copy"], disabled=NO_PGTAP
    )
    await standing_worker(database_url, "with-pgtap", domains=["python-backend", "sql-data"])
    pool = (await client.get("/v1/pool", headers=admin)).json()["domains"]
    assert {each["domain"]: (each["enabled"], each["disabled_reasons"]) for each in pool} == {
        "python-backend": (True, []),
        "sql-data": (True, [{"worker": "no-pgtap", "reason": NO_PGTAP["sql-data"]}]),
        "javascript-frontend": (
            False,
            [
                {"worker": "no-pgtap", "reason": "not in this worker's domain map"},
                {"worker": "with-pgtap", "reason": "not in this worker's domain map"},
            ],
        ),
        "marketing-copy": (
            True,
            [{"worker": "with-pgtap", "reason": "not in this worker's domain map"}],
        ),
    }


async def test_a_users_generation_goes_to_the_least_stocked_domain_a_live_worker_can_make(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, database_url: str
) -> None:
    await standing_worker(database_url, "no-pgtap", domains=["python-backend"], disabled=NO_PGTAP)
    # No stock: sql-data would be the track's first choice, but no live worker can make it.
    served = await ask(client, keys, "/v1/serve", DATA, "serve-1")
    assert served.status_code == 202, served.text
    assert served.json()["job"]["domain"] == "python-backend"
    explicit = await ask(client, keys, "/v1/jobs", DATA | {"user_id": "bob"}, "jobs-1")
    assert explicit.status_code == 202, explicit.text
    assert explicit.json()["job"]["domain"] == "python-backend"

    # A worker that can make sql-data: the least stocked of the two again.
    await standing_worker(database_url, "with-pgtap", domains=["sql-data"])
    await add_mission(pool, "python-backend", qa_status="awaiting_review")
    more = await ask(client, keys, "/v1/jobs", DATA | {"user_id": "carol"}, "jobs-2")
    assert more.json()["job"]["domain"] == "sql-data"
    for _ in range(2):
        await add_mission(pool, "sql-data", qa_status="awaiting_review")
    again = await ask(client, keys, "/v1/jobs", DATA | {"user_id": "dan"}, "jobs-3")
    assert again.json()["job"]["domain"] == "python-backend"


async def test_a_track_no_live_worker_can_make_is_refused_with_the_reasons_and_makes_nothing(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, database_url: str
) -> None:
    for route in ("/v1/serve", "/v1/jobs"):
        refused = await ask(client, keys, route, FRONTEND, f"{route}-nobody")
        body = assert_problem(
            refused, 503, "track 'frontend-engineer'", "javascript-frontend: no worker is running"
        )
        assert body["title"] == "No worker can make this track"
        assert refused.headers["retry-after"] == str(RETRY_AFTER_SECONDS)

    await standing_worker(
        database_url,
        "no-node",
        domains=["python-backend", "sql-data"],
        disabled={"javascript-frontend": "Node.js is not installed"},
    )
    await standing_worker(database_url, "python-only", domains=["python-backend"])
    for route in ("/v1/serve", "/v1/jobs"):
        refused = await ask(client, keys, route, FRONTEND, f"{route}-no-node")
        assert_problem(
            refused,
            503,
            "javascript-frontend: worker no-node: Node.js is not installed; "
            "worker python-only: not in this worker's domain map",
        )
    assert (await job_count(pool), await idempotency_keys(pool)) == (0, 0), "nothing made"

    # Once a worker can make it, the same key makes the job: the refusal remembered nothing.
    await standing_worker(database_url, "with-node", domains=["javascript-frontend"])
    made = await ask(client, keys, "/v1/jobs", FRONTEND, "/v1/jobs-no-node")
    assert made.status_code == 202, made.text
    assert made.json()["job"]["domain"] == "javascript-frontend"
