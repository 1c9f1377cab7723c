"""The pool page of the reviewer UI: per domain, the numbers the tables hold, and a chart whose
bars are the serves of each of the last 24 clock hours."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import asyncpg
from litestar import Litestar
from litestar.testing import AsyncTestClient

from core import domains
from pool import serving
from server.auth import Role
from server.ui.charts import CHART_HEIGHT
from tests.support.fleet import standing_worker
from tests.support.http import sign_in
from tests.support.jobs import enqueue, start_generating
from tests.support.missions import add_mission
from tests.support.server import ROOT

Client = AsyncTestClient[Litestar]
PYTHON = domains.load(ROOT / "domain_map.yaml").domains["python-backend"]
BAR = re.compile(
    r'<rect x="(?P<x>\d+)" y="(?P<y>[\d.]+)" width="6" height="(?P<height>[\d.]+)">'
    r"<title>(?P<hour>[\d-]+ [\d:]+) UTC: (?P<serves>\d+) serves?</title></rect>"
)


def domain_row(page: str, domain: str) -> str:
    match = re.search(rf'<tr id="domain-{domain}">(.*?)</tr>', page, re.DOTALL)
    assert match, f"the page has a row for {domain}"
    return match[1]


def cell(row: str, name: str) -> str:
    match = re.search(rf'<td class="{name}">(.*?)</td>', row, re.DOTALL)
    assert match, f"the row has a {name} cell"
    return re.sub(r"<[^>]+>", "", match[1]).strip()


async def serve_at(pool: asyncpg.Pool, moments: list[datetime]) -> None:
    for index, moment in enumerate(moments):
        async with pool.acquire() as connection, connection.transaction():
            served = await serving.serve(
                connection,
                user_id=f"user-{index}",
                track="backend-engineer",
                domains=(PYTHON,),
                now=moment,
            )
            assert served is not None


async def test_the_pool_page_shows_each_domain_and_its_serves_hour_by_hour(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    for _ in range(2):
        await add_mission(pool, "python-backend", max_serves=100)
    await add_mission(pool, "python-backend", qa_status="awaiting_review")
    generating = await enqueue(pool, "waiting-1")
    await enqueue(pool, "waiting-2")
    await start_generating(pool, generating)
    now = datetime.now(UTC)
    moments = [now, now, now - timedelta(hours=3), *[now - timedelta(hours=5)] * 3]
    await serve_at(pool, moments)

    await sign_in(client, keys["qa_reviewer"])
    page = await client.get("/qa/pool")
    assert page.status_code == 200, page.text
    assert '<a href="/qa/pool" aria-current="page">Pool</a>' in page.text
    assert "Generating <strong>1</strong> of the global cap 40" in page.text

    row = domain_row(page.text, "python-backend")
    assert cell(row, "stock") == f"2 / {PYTHON.target}"
    assert cell(row, "remaining") == str(200 - len(moments))
    # Each mission one bug, whose one rendering serves it whole; nothing spent on models.
    assert (cell(row, "variants"), cell(row, "renderings")) == ("2", str(200 - len(moments)))
    assert cell(row, "cost") == "0.0000 USD"
    assert cell(domain_row(page.text, "sql-data"), "cost") == "none served"
    assert (cell(row, "review"), cell(row, "generating"), cell(row, "pending")) == ("1", "1", "1")

    bars = [match.groupdict() for match in BAR.finditer(row)]
    assert len(bars) == 24
    assert [int(bar["x"]) for bar in bars] == [7 * index for index in range(24)]
    per_hour = Counter(f"{moment:%Y-%m-%d %H}:00" for moment in moments)
    assert {bar["hour"]: int(bar["serves"]) for bar in bars if int(bar["serves"])} == per_hour
    peak = max(per_hour.values())
    for bar in bars:
        height = float(bar["height"])
        assert height == round(int(bar["serves"]) / peak * CHART_HEIGHT, 2)
        assert float(bar["y"]) == round(CHART_HEIGHT - height, 2)
    assert bars[-1]["hour"] == f"{datetime.now(UTC):%Y-%m-%d %H}:00", "the hour under way last"

    quiet = domain_row(page.text, "sql-data")
    assert {match["serves"] for match in BAR.finditer(quiet)} == {"0"}


async def test_the_pool_page_needs_a_session(client: Client) -> None:
    response = await client.get("/qa/pool", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/qa/sign-in?next=%2Fqa%2Fpool"


async def test_the_pool_page_says_why_no_live_worker_can_make_a_domain(
    client: Client, keys: dict[Role, str], database_url: str
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    nobody = await client.get("/qa/pool")
    assert "no worker is running" in domain_row(nobody.text, "python-backend")

    await standing_worker(
        database_url, "no-pgtap", domains=["python-backend"], disabled={"sql-data": "no pgTAP"}
    )
    await standing_worker(database_url, "full", domains=["python-backend", "sql-data"])
    page = (await client.get("/qa/pool")).text
    python, sql, javascript = (
        domain_row(page, name) for name in ("python-backend", "sql-data", "javascript-frontend")
    )
    assert "no worker can make it" not in python
    assert "<li>" not in python, "every live worker makes it"
    assert "no worker can make it" not in sql
    assert "<li>not on no-pgtap: no pgTAP</li>" in sql, "the one that cannot, and why"
    assert "no worker can make it" in javascript
    assert "<li>not on full: not in this worker&#39;s domain map</li>" in javascript


async def test_the_pool_page_shows_spend_by_mode_what_batching_saved_and_the_batches(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    # A call through a batch at gpt-4o-mini's batch price ($0.36), half its synchronous one.
    await pool.execute(
        "INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, outcome,"
        " input_tokens, output_tokens, cost_usd, mode, provider_id)"
        " VALUES (0, 1, 1, 'generate', 'openai', 'gpt-4o-mini', 'ok', 1200000, 900000, 0.36,"
        " 'batch', 'job-0-attempt-1-generate-try-1')"
    )
    await pool.execute(
        "INSERT INTO llm_batches (status, model, lines, provider_batch_id, provider_status)"
        " VALUES ('submitted', 'gpt-4o-mini', 4, 'batch_abc', 'in_progress')"
    )

    await sign_in(client, keys["qa_reviewer"])
    page = await client.get("/qa/pool")

    assert page.status_code == 200, page.text
    text = " ".join(page.text.split())
    assert "$0.00 by 0 calls taken over instead of paid again, and $0.36 by batching" in text
    assert "Batches: 1 under way, 0 lines waiting to go out, 0 jobs waiting for a line." in text
    match = re.search(r'<tr id="mode-batch">(.*?)</tr>', page.text, re.DOTALL)
    assert match, "the page has a row for the batch mode"
    assert re.findall(r"<td>([^<]*)</td>", match[1]) == ["1", "$0.36", "0", "$0.00"]
