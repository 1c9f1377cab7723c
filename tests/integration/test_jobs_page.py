"""The jobs page of the reviewer UI: each domain's queue per lane with its last failure and why
no live worker can make it, and the jobs themselves, filtered and a page at a time, from rows
the real queue code wrote."""

from __future__ import annotations

import re

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from generation import jobs
from server.auth import Role
from server.ui.jobs_page import PAGE_SIZE
from tests.support.fleet import standing_worker
from tests.support.http import sign_in
from tests.support.jobs import claim, enqueue, finish, queries

Client = AsyncTestClient[Litestar]
ROW = re.compile(r'<tr id="job-(\d+)">')
HOSTILE_ERROR = '<script>alert("owned")</script> & the model said <b>no</b>'


def listed(page: str) -> list[int]:
    return [int(job_id) for job_id in ROW.findall(page)]


def job_rows(page: str) -> dict[int, str]:
    """Each listed job's table row."""
    return {
        int(job_id): row
        for job_id, row in re.findall(r'<tr id="job-(\d+)">(.*?)</tr>', page, re.DOTALL)
    }


def queue_of(page: str, domain: str) -> str:
    match = re.search(rf'<tbody id="queue-{domain}">(.*?)</tbody>', page, re.DOTALL)
    assert match, f"the page has the queue of {domain}"
    return match[1]


async def failed(pool: asyncpg.Pool, job_id: int, error: str, worker: str = "box:1") -> None:
    """Claim `job_id` (the oldest pending job) and fail it with `error`."""
    assert await claim(pool, worker, want=1) == [job_id]
    assert await finish(pool, job_id, 1, "failed", error=error)


async def test_the_jobs_page_lists_the_queue_and_what_failed_and_filters_them(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    broken = await enqueue(pool, "user-1")
    await failed(pool, broken, HOSTILE_ERROR)
    await pool.execute(
        """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model,
               finished_at, input_tokens, output_tokens, cost_usd, outcome)
           SELECT $1, 1, n, 'generate', 'openai', 'gpt-test', now(), 900, 300, 0.0123, 'ok'
           FROM generate_series(1, 2) n""",
        broken,
    )
    done = await enqueue(pool, "user-1")
    assert await claim(pool, want=1) == [done]
    assert await finish(pool, done, 1, "completed")
    running = await enqueue(pool, None, domain="sql-data")
    assert await claim(pool, "box:2", want=1) == [running]
    waiting = await enqueue(pool, "user-2")
    refilling = await enqueue(pool, None, domain="sql-data")
    cancelled = await enqueue(pool, "user-3")
    assert await pool.fetchval(queries["job_cancel_if_pending"], cancelled) == cancelled

    await sign_in(client, keys["qa_reviewer"])

    async def shown(query: str) -> list[int]:
        response = await client.get(f"/qa/jobs{query}")
        assert response.status_code == 200, response.text
        return listed(response.text)

    page = await client.get("/qa/jobs")
    assert '<a href="/qa/jobs" aria-current="page">Jobs</a>' in page.text
    # Pending, generating and failed first, newest first.
    assert listed(page.text) == [refilling, waiting, running, broken]
    assert await shown("?status=completed&status=cancelled") == [cancelled, done]
    assert await shown("?lane=replenish") == [refilling, running]
    assert await shown("?lane=interactive&status=pending") == [waiting]
    assert await shown("?domain=python-backend") == [waiting, broken]
    assert await shown("?domain=sql-data&status=failed") == []
    assert await shown("?user=user-1&status=failed&status=completed") == [done, broken]
    assert await shown("?user=user-1&lane=replenish") == []
    assert await shown("?user=nobody") == []

    # A model's error is text, never markup.
    assert "<script>" not in page.text
    escaped = "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt; &amp; the model said &lt;b&gt;no&lt;/b&gt;"
    assert escaped in page.text
    assert '<td class="attempt">1</td>' in job_rows(page.text)[broken]
    assert '$0.0246 <span class="hint">2 calls</span>' in job_rows(page.text)[broken]

    python = queue_of(page.text, "python-backend")
    assert re.search(r'<td class="pending">1</td>\s*<td class="generating">0</td>', python)
    assert f'status=failed">#{broken}</a>' in python, "its last failure, linked"
    assert escaped in python
    sql = queue_of(page.text, "sql-data")
    replenish = r'<td>replenish</td>\s*<td class="pending">1</td>\s*<td class="generating">1</td>'
    assert re.search(replenish, sql)


async def test_the_jobs_page_says_which_domains_no_live_worker_can_make_and_why(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, database_url: str
) -> None:
    await standing_worker(
        database_url, "no-pgtap", domains=["python-backend"], disabled={"sql-data": "no pgTAP"}
    )
    stuck = await enqueue(pool, None, domain="sql-data")
    fine = await enqueue(pool, None, domain="python-backend")
    await sign_in(client, keys["qa_reviewer"])
    page = (await client.get("/qa/jobs")).text

    sql = queue_of(page, "sql-data")
    assert "no worker can make it" in sql
    assert "<li>not on no-pgtap: no pgTAP</li>" in sql
    assert "no worker can make it" not in queue_of(page, "python-backend")
    rows = job_rows(page)
    assert "no worker can make it" in rows[stuck], "a pending job says why it waits"
    assert "no worker can make it" not in rows[fine]


async def test_the_jobs_page_goes_back_a_page_at_a_time(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    total = PAGE_SIZE * 2 + 7
    await pool.execute(
        """INSERT INTO generation_jobs (lane, domain, status, created_at, fair_time, finished_at,
               error)
           SELECT 'replenish', (ARRAY['python-backend', 'sql-data'])[n % 2 + 1], 'failed',
                  now(), now(), now(), 'failure ' || n
           FROM generate_series(1, $1::int) n""",
        total,
    )
    ids = [row["id"] for row in await pool.fetch("SELECT id FROM generation_jobs ORDER BY id DESC")]
    await sign_in(client, keys["admin"])

    seen: list[int] = []
    path = "/qa/jobs?status=failed"
    pages = 0
    while path:
        page = await client.get(path)
        assert page.status_code == 200, page.text
        seen += listed(page.text)
        pages += 1
        older = re.search(r'<a href="(/qa/jobs\?[^"#]+)#list" rel="next">Older jobs</a>', page.text)
        path = older[1].replace("&amp;", "&") if older else ""
        if pages > 1:
            assert "Newest jobs</a>" in page.text
    assert pages == 3
    assert seen == ids, "every job once, newest first"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=lost", "unknown status &#39;lost&#39;"),
        ("lane=fast", "unknown lane &#39;fast&#39;"),
        ("domain=cobol", "unknown domain &#39;cobol&#39;"),
        ("before=12a", "before must be a job id"),
        (f"user={'u' * 201}", "the limit is 200"),
    ],
)
async def test_a_bad_filter_is_a_page_that_says_what_to_change(
    client: Client, keys: dict[Role, str], query: str, message: str
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    response = await client.get(f"/qa/jobs?{query}")
    assert response.status_code == 422
    assert "text/html" in response.headers["content-type"]
    assert message in response.text


async def test_the_jobs_page_needs_a_session(client: Client) -> None:
    response = await client.get("/qa/jobs", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/qa/sign-in?next=%2Fqa%2Fjobs"


async def test_a_job_waiting_for_its_batch_is_listed_pending_and_says_so(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    batched = await enqueue(pool, None, domain="marketing-copy")
    [attempt] = [
        row["attempt"]
        for row in await pool.fetch(
            queries["job_claim_within_cap"], 1, 9, 9, "box:1", None, None, 0, 0, None
        )
    ]
    call = await pool.fetchval(
        queries["llm_call_start_if_generating"],
        batched,
        attempt,
        "generate",
        "openai",
        "gpt-4o-mini",
        1,
        "batch",
        1,
        0,
    )
    assert (
        await pool.fetchval(queries["job_wait_for_call_if_generating"], batched, attempt, call)
        == batched
    )
    queued = await enqueue(pool, None, domain="marketing-copy")

    await sign_in(client, keys["qa_reviewer"])
    page = await client.get("/qa/jobs?status=pending")

    assert page.status_code == 200, page.text
    rows = job_rows(page.text)
    assert set(rows) == {batched, queued}
    assert "waiting for its batch" in rows[batched]
    assert "waiting for its batch" not in rows[queued]
    # The API says the same: pending, waiting for a batch, with no place in the claim's order.
    shown = await jobs.get(pool, batched)
    assert (shown.status, shown.waiting_for, shown.queue_position) == ("pending", "batch", None)
    assert (await jobs.get(pool, queued)).queue_position == 0
