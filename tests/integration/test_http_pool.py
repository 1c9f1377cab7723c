"""GET /v1/pool and POST /v1/pool/replenish: the contract, the forecast's fields, the roles."""

from decimal import Decimal

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.auth import Role
from tests.support.http import assert_problem, bearer
from tests.support.jobs import enqueue
from tests.support.missions import add_mission
from tests.support.spend import write_calls

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

Client = AsyncTestClient[Litestar]

CONTRACT = {
    "domain",
    "kind",
    "approved",
    "awaiting_review",
    "remaining_serves",
    "target",
    "in_flight",
    "pending",
    "enabled",
    "disabled_reasons",
}
FORECAST = {
    "pass_rate",
    "serve_rate_per_hour",
    "lead_time_p90_s",
    "supply_missions",
    "supply_serves",
    "demand_serves",
    "time_to_empty_s",
    "cover",
    "deficit",
}


async def test_the_pool_per_domain_then_a_pass_that_refills_it(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    admin = bearer(keys["admin"])
    for _ in range(8):
        await add_mission(pool, "python-backend", max_serves=100)
    await add_mission(pool, "python-backend", qa_status="awaiting_review")
    answer = await client.get("/v1/pool", headers=admin)
    assert answer.status_code == 200, answer.text
    by_domain = {each["domain"]: each for each in answer.json()["domains"]}
    # The repository's map, in its order.
    assert list(by_domain) == [
        "python-backend",
        "sql-data",
        "javascript-frontend",
        "marketing-copy",
    ]
    backend = by_domain["python-backend"]
    variants = {
        "servable_serves",
        "stock_serves",
        "live_variants",
        "renderings_ready",
        "variant_jobs",
        "rendering_jobs",
    }
    economics = {"spend_usd", "serves", "cost_per_served_instance_usd"}
    assert CONTRACT | variants | economics | {"reachable", "forecast"} == set(backend)
    # Missions of one bug each whose one rendering covers their whole serve limit: all 800 can
    # be served.
    assert {key: backend[key] for key in variants} == {
        "servable_serves": 800,
        "stock_serves": 800,
        "live_variants": 8,
        "renderings_ready": 800,
        "variant_jobs": 0,
        "rendering_jobs": 0,
    }
    assert set(backend["forecast"]) == FORECAST
    assert {key: backend[key] for key in CONTRACT} == {
        "domain": "python-backend",
        "kind": "technical",
        "approved": 8,
        "awaiting_review": 1,
        "remaining_serves": 800,
        "target": 8,
        "in_flight": 0,
        "pending": 0,
        "enabled": True,
        "disabled_reasons": [],
    }
    assert backend["forecast"]["deficit"] == 0, "at its target, nobody served"
    assert backend["forecast"]["time_to_empty_s"] is None
    assert by_domain["sql-data"]["forecast"]["deficit"] == 6, "4 at the prior pass rate 0.72"

    ran = await client.post("/v1/pool/replenish", headers=admin)
    assert ran.status_code == 202, ran.text
    answered = ran.json()
    assert answered["ran"] is True
    enqueued = {each["domain"]: len(each["enqueued"]) for each in answered["domains"]}
    # At most five per domain and pass; marketing-copy's 3 need 5 generations.
    assert enqueued == {"sql-data": 5, "javascript-frontend": 5, "marketing-copy": 5}
    after = {
        each["domain"]: each
        for each in (await client.get("/v1/pool", headers=admin)).json()["domains"]
    }
    assert after["sql-data"]["pending"] == 5
    assert after["marketing-copy"]["forecast"]["deficit"] == 0
    assert after["sql-data"]["forecast"]["deficit"] == 1


async def test_only_admins_read_and_replenish_the_pool(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    for role in ("candidate_app", "qa_reviewer"):
        headers = bearer(keys[role])
        assert_problem(await client.get("/v1/pool", headers=headers), 403, "'admin'")
        assert_problem(await client.post("/v1/pool/replenish", headers=headers), 403, "'admin'")
    assert_problem(await client.post("/v1/pool/replenish"), 401)
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 0
    schema = (await client.get("/schema/openapi.json")).json()
    assert {"/v1/pool", "/v1/pool/replenish"} <= set(schema["paths"])


async def test_the_pool_says_what_a_served_instance_cost_per_domain(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    admin = bearer(keys["admin"])
    before = (await client.get("/v1/pool", headers=admin)).json()["domains"][0]
    assert (before["spend_usd"], before["serves"]) == (0, 0)
    assert before["cost_per_served_instance_usd"] is None, "nothing served yet"
    # A python generation's two calls, 0.30 in all; a sql one's, 0.10.
    for domain, costs in (("python-backend", ["0.25", "0.05"]), ("sql-data", ["0.10"])):
        job = await enqueue(pool, None, domain=domain)
        calls = [(0, "gpt", "generate", "ok", "direct", 0, Decimal(cost)) for cost in costs]
        await write_calls(pool, job, 0, calls, input_tokens=10, output_tokens=10)
    await add_mission(pool, "python-backend", max_serves=100)
    for user in ("ada", "bob", "cy"):
        served = await client.post(
            "/v1/serve",
            json={"user_id": user, "track": "backend-engineer"},
            headers=bearer(keys["candidate_app"]),
        )
        assert served.status_code == 200, served.text

    after = {
        each["domain"]: each
        for each in (await client.get("/v1/pool", headers=admin)).json()["domains"]
    }
    python, sql = after["python-backend"], after["sql-data"]
    assert (python["spend_usd"], python["serves"]) == (pytest.approx(0.30), 3)
    assert python["cost_per_served_instance_usd"] == pytest.approx(0.10)
    assert (sql["spend_usd"], sql["serves"], sql["cost_per_served_instance_usd"]) == (
        pytest.approx(0.10),
        0,
        None,
    )
    metrics = (await client.get("/metrics")).text
    assert 'warmpool_pool_cost_per_served_instance_usd{domain="python-backend"} 0.1' in metrics
    assert 'warmpool_pool_variants_ready{domain="python-backend"} 1.0' in metrics
    assert 'warmpool_pool_renderings_ready{domain="python-backend"} 97.0' in metrics
