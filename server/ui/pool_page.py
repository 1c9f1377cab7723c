"""The pool page: per domain, the stock against its target, the missions in review, the
generations under way against the cap, the replenisher's forecast, the serves of the last hours
as a small chart, and why no live worker can make a domain."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.response import Template

from generation import queue_stats
from generation.openai import prices
from pool import stats
from server.auth import Caller
from server.services import Services
from server.ui import charts
from server.ui.rendering import page

CHART_HOURS = 24


@get("/pool")
async def pool_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
) -> Template:
    settings = services.settings
    async with services.db.acquire() as connection:
        queued = await queue_stats.stats(
            connection,
            global_cap=settings.global_cap,
            max_pending=settings.max_pending,
            budget=services.budget,
        )
        pool_stats = await stats.read(
            connection,
            services.domain_map,
            heartbeat_timeout=settings.heartbeat_timeout,
            price_table=prices.load(settings.prices_file),
        )
        history = await stats.serves_by_hour(connection, services.domain_map, hours=CHART_HOURS)
    return page(
        request,
        "pool.html",
        reviewer=reviewer,
        queued=queued,
        replenish_cap=settings.replenish_cap,
        domains=[(each, charts.hourly_serves(history[each.domain])) for each in pool_stats.domains],
        chart_hours=CHART_HOURS,
        spend=pool_stats.spend,
        batches=pool_stats.batches,
    )
