"""GET /metrics: the figures read from the tables match what the test put there, the process
counters move when work is shed, refused or swept, and the budget shows when it is set; the same
budget in GET /v1/queue. A storm of scrapes takes no connection from serving and reads the
tables once at a time; with a token set, only scrapes that send it are answered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from core import domains
from generation.registry import NOT_IN_ITS_MAP
from pool import serving
from server.app import create_app
from server.auth import Role
from server.runtime import WorkerRuntime
from server.settings import Settings
from tests.support.fleet import EVERY_DOMAIN, standing_worker
from tests.support.generators import Gated
from tests.support.http import bearer
from tests.support.jobs import enqueue, start_generating
from tests.support.missions import add_mission
from tests.support.polling import eventually
from tests.support.server import ROOT, running_server

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

Client = AsyncTestClient[Litestar]
PYTHON = domains.load(ROOT / "domain_map.yaml").domains["python-backend"]
# More scrapes at once than the serving pool has connections (20).
STORM = 24


class Scraped:
    """One scrape, parsed by prometheus-client's own parser."""

    def __init__(self, text: str) -> None:
        self.help: dict[str, str] = {}
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            self.help[family.name] = family.documentation
            for sample in family.samples:
                self.samples[sample.name, frozenset(sample.labels.items())] = sample.value

    def __call__(self, name: str, **labels: str) -> float:
        return self.samples[name, frozenset(labels.items())]


async def scrape(client: Client) -> Scraped:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scraped(response.text)


async def bill(
    pool: asyncpg.Pool, outcome: str, tokens: tuple[int, int] = (0, 0), usd: str = "0"
) -> None:
    await pool.execute(
        "INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, outcome,"
        " input_tokens, output_tokens, cost_usd) SELECT 0, 1, count(*) + 1, 'generate', 'test',"
        " 'm', $1, $2, $3, $4 FROM llm_calls",
        outcome,
        *tokens,
        Decimal(usd),
    )


async def serve_users(pool: asyncpg.Pool, count: int) -> None:
    for index in range(count):
        async with pool.acquire() as connection, connection.transaction():
            served = await serving.serve(
                connection, user_id=f"served-{index}", track="backend-engineer", domains=(PYTHON,)
            )
            assert served is not None


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Every scrape reads the tables: each sees what the test wrote just before."""
    return msgspec.structs.replace(settings, metrics_refresh_seconds=0.0)


@pytest.fixture
async def limited(settings: Settings) -> AsyncIterator[Client]:
    """A server whose queue refuses early: one active job per user, two pending in all."""
    app = create_app(msgspec.structs.replace(settings, user_cap=1, max_pending=2))
    async with AsyncTestClient(app) as client:
        yield client


async def test_the_database_figures_match_the_tables(client: Client, pool: asyncpg.Pool) -> None:
    waited = datetime.now(UTC) - timedelta(seconds=90)
    interactive = [await enqueue(pool, f"user-{index}", now=waited) for index in range(3)]
    replenish = [await enqueue(pool, None, domain="sql-data") for _ in range(2)]
    await start_generating(pool, interactive[0], replenish[0])
    for _ in range(3):
        await add_mission(pool, "python-backend", max_serves=100)
    await add_mission(pool, "python-backend", qa_status="awaiting_review")
    for _ in range(2):
        await add_mission(pool, "sql-data", max_serves=50)
    await serve_users(pool, 4)
    await bill(pool, "ok", (100, 200), "0.010")
    await bill(pool, "ok", (50, 25), "0.020")
    await bill(pool, "failed", (10, 0))
    await bill(pool, "started")

    metrics = await scrape(client)

    assert metrics("warmpool_queue_pending", lane="interactive") == 2
    assert metrics("warmpool_queue_pending", lane="replenish") == 1
    assert metrics("warmpool_queue_generating", lane="interactive") == 1
    assert metrics("warmpool_queue_generating", lane="replenish") == 1
    assert 90 <= metrics("warmpool_queue_oldest_pending_age_seconds", lane="interactive") < 300
    assert metrics("warmpool_queue_global_cap") == 40
    assert metrics("warmpool_queue_max_pending") == 200

    backend, sql = {"domain": "python-backend"}, {"domain": "sql-data"}
    assert metrics("warmpool_pool_approved_missions", **backend) == 3
    assert metrics("warmpool_pool_approved_missions", **sql) == 2
    assert metrics("warmpool_pool_remaining_serves", **backend) == 300 - 4
    assert metrics("warmpool_pool_remaining_serves", **sql) == 100
    assert metrics("warmpool_pool_awaiting_review", **backend) == 1
    assert metrics("warmpool_pool_target", **backend) == PYTHON.target
    assert metrics("warmpool_serves_total", **backend) == 4
    assert metrics("warmpool_serves_total", **sql) == 0
    assert metrics("warmpool_pool_deficit", domain="marketing-copy") > 0

    assert metrics("warmpool_llm_calls_total", outcome="ok") == 2
    assert metrics("warmpool_llm_calls_total", outcome="failed") == 1
    assert metrics("warmpool_llm_calls_total", outcome="refused") == 0
    assert metrics("warmpool_llm_calls_unfinished") == 1
    assert metrics("warmpool_llm_input_tokens_total", outcome="ok") == 150
    assert metrics("warmpool_llm_output_tokens_total", outcome="ok") == 225
    assert metrics("warmpool_llm_input_tokens_total", outcome="failed") == 10
    assert metrics("warmpool_llm_cost_usd_total", outcome="ok") == pytest.approx(0.03)

    assert metrics.help["warmpool_queue_pending"].startswith("Database, read at scrape time:")
    assert metrics.help["warmpool_serves"].startswith("Database, read at scrape time:")
    assert metrics.help["warmpool_sheds"].startswith("This process, since it started:")
    assert not any(name.startswith("warmpool_budget") for name in metrics.help), "no budget set"


async def test_whether_a_live_worker_can_make_each_domain(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    await pool.execute("DELETE FROM workers")
    await standing_worker(
        database_url, "no-pgtap", domains=["python-backend"], disabled={"sql-data": "no pgTAP"}
    )
    await standing_worker(
        database_url,
        "no-pgtap-either",
        domains=["python-backend", "marketing-copy"],
        disabled={"sql-data": "no pgTAP"},
    )
    metrics = await scrape(client)
    enabled = {
        domain: metrics("warmpool_pool_domain_enabled", domain=domain)
        for domain in ("python-backend", "sql-data", "javascript-frontend", "marketing-copy")
    }
    assert enabled == {
        "python-backend": 1,
        "sql-data": 0,
        "javascript-frontend": 0,
        "marketing-copy": 1,
    }
    disabled = {
        (dict(labels)["domain"], dict(labels)["reason"]): workers
        for (name, labels), workers in metrics.samples.items()
        if name == "warmpool_pool_domain_disabled_workers"
    }
    assert disabled == {
        ("sql-data", "no pgTAP"): 2,
        ("javascript-frontend", NOT_IN_ITS_MAP): 2,
        ("marketing-copy", NOT_IN_ITS_MAP): 1,
    }
    what = metrics.help["warmpool_pool_domain_enabled"]
    assert what.startswith("Database, read at scrape time: 1 while some live worker"), what
    assert "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS" in what


async def test_process_counters_move_with_sheds_refusals_and_sweeps(
    limited: Client, keys: dict[Role, str], pool: asyncpg.Pool, settings: Settings
) -> None:
    before = await scrape(limited)
    for counter in ("warmpool_sheds_total", "warmpool_swept_jobs_total"):
        assert {value for (name, _), value in before.samples.items() if name == counter} == {0}
    assert before("warmpool_user_cap_refusals_total") == 0

    async def ask(user_id: str, key: str) -> int:
        headers = bearer(keys["candidate_app"]) | {"Idempotency-Key": key}
        body = {"user_id": user_id, "track": "backend-engineer"}
        return (await limited.post("/v1/jobs", json=body, headers=headers)).status_code

    assert [await ask("a", "1"), await ask("a", "2"), await ask("b", "3")] == [202, 429, 202]
    assert await ask("c", "4") == 503
    counted = await scrape(limited)
    assert counted("warmpool_user_cap_refusals_total") == 1
    assert counted("warmpool_sheds_total", lane="interactive") == 1
    assert counted("warmpool_sheds_total", lane="replenish") == 0

    # This process's worker sweeps: one generation stale, one pending job expired.
    first = await pool.fetchval("SELECT min(id) FROM generation_jobs")
    await start_generating(pool, first)
    services: Any = limited.app.state.services
    runtime = WorkerRuntime(
        pool, "unused", settings, Gated(), capabilities=EVERY_DOMAIN, metrics=services.metrics
    )
    swept = await runtime.sweeper.run_once(datetime.now(UTC) + timedelta(hours=2))
    assert (len(swept.stale), len(swept.expired)) == (1, 1)
    after = await scrape(limited)
    assert after("warmpool_swept_jobs_total", reason="stale") == 1
    assert after("warmpool_swept_jobs_total", reason="expired") == 1


async def test_the_budget_in_the_metrics_and_the_queue(
    settings: Settings, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    budgeted = msgspec.structs.replace(settings, daily_budget_usd=1.0)
    async with AsyncTestClient(create_app(budgeted)) as client:
        await bill(pool, "ok", usd="0.25")
        metrics = await scrape(client)
        assert metrics("warmpool_budget_daily_usd") == 1.0
        assert metrics("warmpool_budget_spent_today_usd") == 0.25
        assert metrics("warmpool_budget_reserved_usd") == 0
        assert metrics("warmpool_budget_remaining_usd") == 0.75
        assert metrics("warmpool_budget_replenish_paused") == 0
        assert metrics("warmpool_budget_exhausted") == 0

        await bill(pool, "ok", usd="1.00")
        metrics = await scrape(client)
        assert metrics("warmpool_budget_exhausted") == 1
        assert metrics("warmpool_budget_replenish_paused") == 1
        queue = await client.get("/v1/queue", headers=bearer(keys["admin"]))
        assert queue.status_code == 200, queue.text
        budget = queue.json()["budget"]
        assert budget["spent_today_usd"] == 1.25
        assert (budget["exhausted"], budget["replenish_paused"]) == (True, True)


async def test_without_a_budget_the_queue_says_null(client: Client, keys: dict[Role, str]) -> None:
    queue = await client.get("/v1/queue", headers=bearer(keys["admin"]))
    assert queue.json()["budget"] is None


async def test_openmetrics_when_asked_and_no_place_in_the_api_schema(client: Client) -> None:
    response = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")
    schema = (await client.get("/schema/openapi.json")).json()
    assert "/metrics" not in schema["paths"]


async def test_serves_ever_count_every_instance_however_its_mission_ended(
    client: Client, pool: asyncpg.Pool
) -> None:
    retiring = await add_mission(pool, max_serves=2)
    retired_by_a_reviewer = await add_mission(pool, max_serves=100)
    await add_mission(pool, qa_status="awaiting_review")
    await add_mission(pool, qa_status="rejected")
    await serve_users(pool, 5)
    await pool.execute(
        "UPDATE missions SET retired_at = now(), retire_reason = 'test' WHERE id = $1",
        retired_by_a_reviewer,
    )
    await add_mission(pool, max_serves=100)
    async with pool.acquire() as connection, connection.transaction():
        await serving.serve(connection, user_id="last", track="backend-engineer", domains=(PYTHON,))
    retired = await pool.fetch("SELECT id FROM missions WHERE retired_at IS NOT NULL ORDER BY id")
    assert [row["id"] for row in retired] == [retiring, retired_by_a_reviewer]

    metrics = await scrape(client)

    instances = await pool.fetchval("SELECT count(*) FROM mission_instances")
    assert instances == 6
    assert metrics("warmpool_serves_total", domain="python-backend") == instances


async def test_with_a_token_set_only_a_scrape_that_sends_it_is_answered(settings: Settings) -> None:
    token = "metrics-token-0123456789abcdef"
    async with AsyncTestClient(
        create_app(msgspec.structs.replace(settings, metrics_token=token))
    ) as client:
        for sent in (
            {},
            bearer("another-token-0123456789abcdef"),
            {"Authorization": f"Basic {token}"},
        ):
            refused = await client.get("/metrics", headers=sent)
            assert refused.status_code == 401, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.headers["www-authenticate"] == "Bearer"
            assert "WARMPOOL_METRICS_TOKEN" in refused.json()["detail"]
        answered = await client.get("/metrics", headers=bearer(token))
        assert answered.status_code == 200, answered.text
        assert "warmpool_queue_pending" in answered.text


async def test_a_storm_of_scrapes_takes_no_serving_connection_and_reads_once_at_a_time(
    database_url: str, pool: asyncpg.Pool, keys: dict[Role, str], tmp_path: Path
) -> None:
    """More scrapes at once than the serving pool has connections, over real connections to a
    real server, while their read of the tables is held up (the queue's table is locked, as a
    slow count over a big table would hold it): a serve still gets its connection at once, and
    one read of the tables is under way, not one per scrape."""
    await add_mission(pool, max_serves=100)
    # A serve that cannot get a connection answers 503 after this instead of hanging; the last
    # scrape, answered in the last of the storm's turns, comes well within it.
    overrides = {"WARMPOOL_REQUEST_TIMEOUT_SECONDS": "8"}
    with running_server(database_url, tmp_path, overrides=overrides) as url:
        async with pool.acquire() as blocker, blocker.transaction():
            await blocker.execute("LOCK TABLE generation_jobs IN ACCESS EXCLUSIVE MODE")
            # Each written out in full, so that the server holds every one of them before it
            # reads the serve below.
            storm = [await send_scrape(url) for _ in range(STORM)]
            await eventually(lambda: reads_waiting(pool), within=10, what="a scrape's read")
            async with httpx.AsyncClient(base_url=url) as http:
                served = await http.post(
                    "/v1/serve",
                    json={"user_id": "during-the-storm", "track": "backend-engineer"},
                    headers=bearer(keys["candidate_app"]),
                )
            assert served.status_code == 200, served.text
            assert await reads_waiting(pool) == 1, "one read for all the scrapes"
        answers = [await answered(*connection) for connection in storm]
    assert [status for status, _ in answers] == [200] * STORM
    assert len({body for _, body in answers}) == 1, "every scrape got the same snapshot"


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def send_scrape(url: str) -> Stream:
    address = urlsplit(url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
    await writer.drain()
    return reader, writer


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[int, bytes]:
    """The answer's status and body, once the server has closed the connection."""
    answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def reads_waiting(pool: asyncpg.Pool) -> int:
    """The statements of this database waiting for a lock (only the scrapes' reads can)."""
    waiting: int = await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND backend_type = 'client backend' AND wait_event_type = 'Lock'"
    )
    return waiting


async def test_spend_by_mode_and_the_money_resumed_calls_and_batching_saved(
    client: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    await bill(pool, "ok", (100, 200), "0.010")
    for resumed, usd in ((2, "0.040"), (0, "0.005")):
        await bill(pool, "ok", (10, 20), usd)
        await pool.execute(
            "UPDATE llm_calls SET mode = 'background', resumed = $1, provider_id = 'resp'"
            " WHERE id = (SELECT max(id) FROM llm_calls)",
            resumed,
        )
    # A call through a batch, at gpt-4o-mini's batch price: half what it would have cost.
    await bill(pool, "ok", (1200, 900), "0.000360")
    await pool.execute(
        "UPDATE llm_calls SET mode = 'batch', model = 'gpt-4o-mini', provider_id = 'line'"
        " WHERE id = (SELECT max(id) FROM llm_calls)"
    )
    metrics = await scrape(client)
    assert metrics("warmpool_llm_mode_calls_total", mode="direct") == 1
    assert metrics("warmpool_llm_mode_calls_total", mode="background") == 2
    assert metrics("warmpool_llm_mode_calls_total", mode="batch") == 1
    assert metrics("warmpool_llm_batch_saved_usd") == pytest.approx(0.00036)
    assert metrics("warmpool_batches_open") == 0
    assert metrics("warmpool_jobs_waiting_for_batch") == 0
    assert metrics("warmpool_llm_mode_cost_usd_total", mode="background") == pytest.approx(0.045)
    assert metrics("warmpool_llm_resumed_calls_total", mode="background") == 2
    assert metrics("warmpool_llm_resumed_saved_usd_total", mode="background") == pytest.approx(
        0.080
    )
    assert metrics("warmpool_llm_resumed_calls_total", mode="direct") == 0

    answer = await client.get("/v1/pool", headers=bearer(keys["admin"]))
    assert answer.status_code == 200, answer.text
    spend = answer.json()["spend"]
    assert (spend["resumed_calls"], spend["saved_by_resumed_usd"]) == (2, pytest.approx(0.08))
    assert spend["saved_by_batch_usd"] == pytest.approx(0.00036)
    assert set(spend["modes"]) == {"direct", "background", "batch"}
    batches = answer.json()["batches"]
    assert batches == {"batches": [], "queued_lines": 0, "waiting_jobs": 0}
    assert spend["modes"]["background"]["llm_calls"] == 2
    assert spend["modes"]["direct"]["cost_usd"] == pytest.approx(0.01)
