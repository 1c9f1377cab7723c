"""The reviewer UI in a real browser: Debian's chromium, headless, driven through playwright
against a real `python -m server serve` process on the test database, over plain http on
127.0.0.1 as `scripts/serve` runs it."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
import pytest
from playwright.async_api import expect

from core import domains
from server.auth import Role
from tests.support.browser import ARTIFACTS, chromium
from tests.support.proven_missions import store_mission
from tests.support.server import ROOT, running_server

pytestmark = pytest.mark.slow

PYTHON = domains.load(ROOT / "domain_map.yaml").domains["python-backend"]


async def test_a_reviewer_signs_in_opens_a_mission_approves_it_and_it_leaves_the_queue(
    database_url: str, keys: dict[Role, str], pool: asyncpg.Pool, tmp_path: Path
) -> None:
    mission_id = await store_mission(
        pool, PYTHON, title="Discounts that add up", requested_by="user-42"
    )
    await store_mission(pool, PYTHON, title="Another mission")

    # As scripts/serve sets it: this server answers plain http.
    plain_http = {"WARMPOOL_SECURE_COOKIES": "false"}
    with running_server(database_url, tmp_path, overrides=plain_http) as url:
        async with chromium(tmp_path / "chromium-profile") as browser:
            page = await browser.new_page()
            await page.goto(f"{url}/qa")
            await expect(page).to_have_url(re.compile(r"/qa/sign-in\?next="))
            await page.get_by_label("Reviewer key").fill(keys["qa_reviewer"])
            await page.get_by_role("button", name="Sign in").click()

            await expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
            links = page.get_by_role("link", name=re.compile(r"^#\d+ "))
            await expect(links).to_have_text(
                [f"#{mission_id} Discounts that add up", re.compile("Another mission")]
            )
            await expect(page.get_by_text("user waiting: user-42")).to_be_visible()

            await page.get_by_role("link", name="Discounts that add up").click()
            await expect(page.get_by_role("heading", level=1)).to_have_text(
                f"Mission #{mission_id}: Discounts that add up"
            )
            await expect(page.locator("table.side-by-side del")).to_have_text(
                "    return round(subtotal * (1 - discount), 2)"
            )
            await expect(page.locator("table.side-by-side ins")).to_have_text(
                "    return round(subtotal * (1 + discount), 2)"
            )
            await expect(
                page.get_by_role("row", name=re.compile("^Sabotage try 1"))
            ).to_be_visible()
            await page.screenshot(path=ARTIFACTS / "review-mission-page.png", full_page=True)

            await page.get_by_label("Note (optional)").fill("One sign, fairly hidden.")
            await page.get_by_role("button", name="Approve").click()
            await expect(page.get_by_role("status")).to_have_text(
                f"Mission #{mission_id} “Discounts that add up” approved."
            )
            await expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
            await expect(links).to_have_text([re.compile("Another mission")])

            # Signing out ends the session for a copy of its cookie too.
            (cookie,) = await browser.cookies()
            assert (cookie["httpOnly"], cookie["sameSite"], cookie["secure"]) == (
                True,
                "Lax",
                False,
            )
            await page.get_by_role("button", name="Sign out").click()
            await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
            await browser.add_cookies(
                [
                    {
                        "name": cookie["name"],
                        "value": cookie["value"],
                        "domain": cookie["domain"],
                        "path": cookie["path"],
                    }
                ]
            )
            await page.goto(f"{url}/qa")
            await expect(page.get_by_role("status")).to_have_text(
                "Your session has ended: sign in again."
            )
            await expect(page).to_have_url(re.compile(r"/qa/sign-in\?next="))

    row = await pool.fetchrow(
        "SELECT qa_status, reviewed_by, review_note FROM missions WHERE id = $1", mission_id
    )
    assert row is not None
    assert tuple(row) == ("approved", "test-qa_reviewer", "One sign, fairly hidden.")
