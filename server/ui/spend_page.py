"""The spend page: where today's budget stands, and where the money went, day by day and over
the window by model, purpose and outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template

from generation import budget as spend_budget
from generation import spend_report
from server.auth import Caller
from server.errors import BadRequest
from server.services import Services
from server.ui.rendering import page

DEFAULT_DAYS = 14
MAX_DAYS = 366
# What each outcome of a model call means, as the ledger records it.
OUTCOMES = {
    "ok": "answered",
    "failed": "an error once the request was sent: it may have billed",
    "refused": "refused by the model",
    "malformed": "an answer that could not be used",
    "unbilled": "an error before the request reached the model",
    "started": "under way, or its process died mid-call",
}


@get("/spend")
async def spend_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    days: FromQuery[str] = str(DEFAULT_DAYS),
) -> Template:
    window = _days(days)
    today = datetime.now(UTC).date()
    async with services.db.acquire() as connection:
        budget = (
            None
            if services.budget is None
            else await spend_budget.status(connection, services.budget)
        )
        spent = await spend_report.by_day(
            connection, first=today - timedelta(days=window - 1), last=today
        )
    return page(
        request,
        "spend.html",
        reviewer=reviewer,
        budget=budget,
        days=spent,
        window=window,
        today=today,
        total=spend_report.summed(day.total for day in spent),
        peak=max((day.total.cost_usd for day in spent), default=0.0),
        by_model=spend_report.totals_by(spent, lambda group: group.model),
        by_purpose=spend_report.totals_by(spent, lambda group: group.purpose),
        by_outcome=spend_report.totals_by(spent, lambda group: group.outcome),
        by_mode=spend_report.totals_by(spent, lambda group: group.mode),
        outcomes=OUTCOMES,
    )


def _days(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_DAYS):
        raise BadRequest(f"days must be a whole number from 1 to {MAX_DAYS}, not {text!r}")
    return int(text)
