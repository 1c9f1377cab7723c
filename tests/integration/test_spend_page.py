"""The spend page of the reviewer UI: where today's budget stands, and the ledger per day,
model, purpose, outcome and mode, from ledger rows written and finished by the ledger's own queries."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import date, timedelta
from decimal import Decimal

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.app import create_app
from server.auth import Role
from server.settings import Settings
from tests.support.http import sign_in
from tests.support.jobs import claim, enqueue
from tests.support.spend import Call, write_calls

Client = AsyncTestClient[Litestar]
CALLS: list[Call] = [
    (0, "gpt-big", "generate", "ok", "direct", 0, Decimal("0.0400")),
    (0, "gpt-big", "generate", "ok", "background", 1, Decimal("0.0350")),
    (0, "gpt-big", "sabotage", "malformed", "direct", 0, Decimal("0.0125")),
    (0, "gpt-small", "sabotage", "ok", "direct", 0, Decimal("0.0020")),
    (1, "gpt-big", "generate", "failed", "direct", 0, Decimal("0.0600")),
    (3, "gpt-small", "generate", "ok", "background", 2, Decimal("0.0010")),
    # Outside a week's window.
    (9, "gpt-big", "generate", "ok", "direct", 0, Decimal("1.0000")),
]


@pytest.fixture
async def budget_client(settings: Settings) -> AsyncIterator[Client]:
    budgeted = msgspec.structs.replace(settings, daily_budget_usd=2.0)
    async with AsyncTestClient(create_app(budgeted), base_url="https://testserver.local") as client:
        yield client


async def calls_and_a_reservation(pool: asyncpg.Pool) -> tuple[int, date]:
    """The calls of CALLS, of one job; the job it returns, generating, reserving $0.50 of
    today's budget; and the day the calls count back from."""
    job = await enqueue(pool, "user-1")
    today = await write_calls(pool, job, 0, CALLS, input_tokens=1000, output_tokens=200)
    running = await enqueue(pool, "user-2")
    assert await claim(pool, want=2) == [job, running]
    await pool.execute(
        "UPDATE generation_jobs SET reserved_usd = 0.5 WHERE id = $1 AND attempt = 1", running
    )
    return running, today


def day_section(page: str, day: date) -> str:
    match = re.search(rf'<tbody id="day-{day}">(.*?)</tbody>', page, re.DOTALL)
    assert match, f"the page has {day}"
    return match[1]


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


async def test_the_spend_page_shows_the_ledger_per_day_and_the_budgets_state(
    budget_client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    _, today = await calls_and_a_reservation(pool)
    await sign_in(budget_client, keys["admin"])
    response = await budget_client.get("/qa/spend?days=7")
    assert response.status_code == 200, response.text
    page = response.text
    assert '<a href="/qa/spend" aria-current="page">Spend</a>' in page

    in_window = [call for call in CALLS if call[0] < 7]
    spent_today = sum(call[6] for call in CALLS if call[0] == 0)
    assert '<dd id="budget-limit">$2.0000</dd>' in page
    assert f'<dd id="budget-spent">${spent_today:.4f}</dd>' in page
    assert '<dd id="budget-reserved">$0.5000</dd>' in page
    assert (
        f'<dd id="budget-remaining">${Decimal(2) - spent_today - Decimal("0.5"):.4f}</dd>' in page
    )
    assert "Claims are open on both lanes." in page

    total = sum(call[6] for call in in_window)
    assert f"${total:.4f} in {len(in_window)} model calls." in text(page)
    assert f"day-{today - timedelta(days=9)}" not in page, "outside the window"
    assert f"day-{today - timedelta(days=2)}" not in page, "a day without calls"

    for days_ago in (0, 1, 3):
        calls = [call for call in in_window if call[0] == days_ago]
        section = day_section(page, today - timedelta(days=days_ago))
        groups: dict[tuple[str, str, str, str], list[tuple[int, Decimal]]] = defaultdict(list)
        for _, model, purpose, outcome, mode, resumed, cost in calls:
            groups[(model, purpose, outcome, mode)].append((resumed, cost))
        rows = re.findall(r'<tr class="group">(.*?)</tr>', section, re.DOTALL)
        shown = [text(row) for row in rows]
        expected = [
            f"{model} {purpose} {outcome} {mode} {len(group)} {1000 * len(group):,} "
            f"{200 * len(group):,} ${sum(cost for _, cost in group):.4f} "
            f"{sum(resumed for resumed, _ in group)} / "
            f"${sum(resumed * cost for resumed, cost in group):.4f}"
            for (model, purpose, outcome, mode), group in sorted(
                groups.items(), key=lambda item: -sum(cost for _, cost in item[1])
            )
        ]
        assert shown == expected, "each group, the costliest first"
        day_total = re.search(r'<tr class="day-total">(.*?)</tr>', section, re.DOTALL)
        assert day_total
        day_cost = sum(call[6] for call in calls)
        day_saved = sum(call[5] * call[6] for call in calls)
        assert text(day_total[1]).endswith(
            f"${day_cost:.4f} {sum(c[5] for c in calls)} / ${day_saved:.4f}"
        )

    by_model = re.search(r"<caption>By model</caption>(.*?)</table>", page, re.DOTALL)
    assert by_model
    models = [text(row) for row in re.findall(r"<tr>(.*?)</tr>", by_model[1], re.DOTALL)]
    big = sum(call[6] for call in in_window if call[1] == "gpt-big")
    assert models[1].startswith("gpt-big 4 ")
    assert models[1].endswith(f"${big:.4f}"), "what takeovers saved is shown by mode only"

    by_mode = re.search(r"<caption>By mode</caption>(.*?)</table>", page, re.DOTALL)
    assert by_mode
    modes = [text(row) for row in re.findall(r"<tr>(.*?)</tr>", by_mode[1], re.DOTALL)]
    assert modes[1:] == [
        "direct 4 4,000 800 $0.1145 0 / $0.0000",
        "background 2 2,000 400 $0.0360 3 / $0.0370",
    ]


async def test_a_spent_budget_says_what_it_stops(
    budget_client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    running, _ = await calls_and_a_reservation(pool)
    await pool.execute("UPDATE generation_jobs SET reserved_usd = 2.5 WHERE id = $1", running)
    await sign_in(budget_client, keys["qa_reviewer"])
    page = (await budget_client.get("/qa/spend")).text
    assert "The budget stops every claim until the day ends." in page


async def test_without_a_budget_the_page_says_spend_is_not_limited(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    empty = (await client.get("/qa/spend")).text
    assert "No daily budget is set" in empty
    assert "No model call started in the last 14 days." in empty
    await calls_and_a_reservation(pool)
    page = (await client.get("/qa/spend?days=30")).text
    assert f"${sum(call[6] for call in CALLS):.4f} in {len(CALLS)} model calls." in text(page)


@pytest.mark.parametrize("days", ["0", "367", "-1", "two", "9" * 400])
async def test_a_bad_window_is_a_page_that_says_what_to_change(
    client: Client, keys: dict[Role, str], days: str
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    response = await client.get("/qa/spend", params={"days": days})
    assert response.status_code == 422
    assert "days must be a whole number from 1 to 366" in response.text


async def test_the_spend_page_needs_a_session(client: Client) -> None:
    response = await client.get("/qa/spend", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/qa/sign-in?next=%2Fqa%2Fspend"
