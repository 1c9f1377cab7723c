"""The operators' pages in a real browser: Debian's chromium, headless, against a real
`python -m server serve` process on the test database, over plain http on 127.0.0.1 as
`scripts/serve` runs it. From the pool page to the jobs of a domain, the jobs page with a domain
no worker can make and a failure whose error holds markup, its filter form, and the spend page
with a budget; each page is saved as a screenshot in tests/artifacts."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest
from playwright.async_api import Page, expect

from server.auth import Role
from tests.support.browser import ARTIFACTS, LAPTOP, chromium, png_size
from tests.support.fleet import standing_worker
from tests.support.jobs import claim, enqueue, finish
from tests.support.server import running_server
from tests.support.spend import Call, write_calls

pytestmark = pytest.mark.slow

HOSTILE_ERROR = "<script>alert('owned')</script> the model answered <b>nothing</b>"
NO_PGTAP = "pgTAP is not installed in the PostgreSQL that proofs use"
CALLS: list[Call] = [
    (0, "gpt-4.1", "generate", "ok", "background", 1, Decimal("0.2100")),
    (0, "gpt-4.1", "sabotage", "ok", "direct", 0, Decimal("0.0800")),
    (0, "gpt-4.1-mini", "sabotage", "malformed", "direct", 0, Decimal("0.0150")),
    (1, "gpt-4.1", "generate", "failed", "direct", 0, Decimal("0.1900")),
    (1, "gpt-4.1", "generate", "ok", "direct", 0, Decimal("0.2300")),
    (2, "gpt-4.1-mini", "generate", "ok", "direct", 0, Decimal("0.0400")),
]


async def jobs_of_every_kind(pool: asyncpg.Pool) -> dict[str, int]:
    """Failed (one with markup in its error), generating and pending jobs, through the queue's
    own queries, the oldest first."""
    made = {}
    made["hostile"] = await enqueue(pool, "user-7")
    assert await claim(pool, "box:1", want=1) == [made["hostile"]]
    assert await finish(pool, made["hostile"], 1, "failed", error=HOSTILE_ERROR)
    made["sweep"] = await enqueue(pool, None)
    assert await claim(pool, "box:2", want=1) == [made["sweep"]]
    error = "worker box:2 stopped heartbeating for more than 00:01:00 (it probably died)"
    assert await finish(pool, made["sweep"], 1, "failed", error=error)
    made["running"] = await enqueue(pool, None)
    assert await claim(pool, "box:1", want=1) == [made["running"]]
    made["waiting"] = await enqueue(pool, "user-8")
    made["stuck"] = await enqueue(pool, None, domain="sql-data")
    return made


async def screenshot(page: Page, name: str) -> None:
    """The whole page, saved; it fits the laptop's width without scrolling sideways."""
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=path, full_page=True)
    assert png_size(path)[0] == LAPTOP["width"]
    assert png_size(path)[1] >= LAPTOP["height"]
    wide = await page.evaluate("document.documentElement.scrollWidth")
    assert wide <= LAPTOP["width"], f"{name} is {wide} px wide, wider than the screen"


async def test_an_operator_finds_why_a_domain_is_empty_and_where_the_money_went(
    database_url: str, keys: dict[Role, str], pool: asyncpg.Pool, tmp_path: Path
) -> None:
    await standing_worker(
        database_url,
        "box",
        domains=["python-backend", "javascript-frontend", "marketing-copy"],
        disabled={"sql-data": NO_PGTAP},
    )
    made = await jobs_of_every_kind(pool)
    await write_calls(pool, made["hostile"], 1, CALLS, input_tokens=4000, output_tokens=1500)
    spent_today = sum(call[6] for call in CALLS if call[0] == 0)

    overrides = {"WARMPOOL_SECURE_COOKIES": "false", "WARMPOOL_DAILY_BUDGET_USD": "5"}
    with running_server(database_url, tmp_path, overrides=overrides) as url:
        async with chromium(tmp_path / "chromium-profile") as browser:
            page = await browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))
            await page.goto(f"{url}/qa/pool")
            await page.get_by_label("Reviewer key").fill(keys["admin"])
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_role("heading", name="Pool")).to_be_visible()

            # From the pool's count of pending jobs to those jobs.
            await page.locator("#domain-python-backend td.pending a").click()
            await expect(page).to_have_url(re.compile(r"/qa/jobs\?domain=python-backend"))
            rows = page.locator("table.jobs tbody tr")
            await expect(rows).to_have_count(1)
            await expect(rows.first).to_contain_text("user-8")

            await page.get_by_role("link", name="Jobs", exact=True).click()
            await expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
            sql = page.locator("#queue-sql-data")
            await expect(sql).to_contain_text("no worker can make it")
            await expect(sql).to_contain_text(f"not on box: {NO_PGTAP}")
            await expect(rows).to_have_count(5)
            stuck = page.locator(f"#job-{made['stuck']}")
            await expect(stuck).to_contain_text("no worker can make it")
            error = page.locator(f"#job-{made['hostile']} .job-error")
            await expect(error).to_have_text(HOSTILE_ERROR)
            await expect(page.locator(f"#job-{made['hostile']} td.spend")).to_contain_text(
                f"${sum(call[6] for call in CALLS):.4f}"
            )
            await screenshot(page, "ops-jobs-page")

            # Only the replenish lane's failures, through the form.
            await page.get_by_label("pending", exact=True).uncheck()
            await page.get_by_label("generating", exact=True).uncheck()
            await page.get_by_label("Lane").select_option("replenish")
            await page.get_by_role("button", name="Show").click()
            await expect(page).to_have_url(re.compile(r"status=failed&lane=replenish"))
            await expect(rows).to_have_count(1)
            await expect(rows.first).to_contain_text("stopped heartbeating")

            await page.get_by_role("link", name="Spend", exact=True).click()
            await expect(page.get_by_role("heading", name="Spend", exact=True)).to_be_visible()
            await expect(page.locator("#budget-limit")).to_have_text("$5.0000")
            await expect(page.locator("#budget-spent")).to_have_text(f"${spent_today:.4f}")
            await expect(page.locator("#budget-state")).to_have_text(
                "Claims are open on both lanes."
            )
            await expect(page.locator("table.spend-days tbody")).to_have_count(3)
            today = page.locator("table.spend-days tbody").first
            await expect(today.locator("tr.group")).to_have_count(3)
            await expect(today.locator("tr.day-total")).to_contain_text(f"${spent_today:.4f}")
            await screenshot(page, "ops-spend-page")

            assert dialogs == [], "no script a job's error held ever ran"
