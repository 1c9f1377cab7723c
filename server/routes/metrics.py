"""GET /metrics (no auth): the Prometheus text format, or OpenMetrics when the scraper asks.
Scrapes are answered one at a time, in turns spaced apart (`server.metrics.Scraping`)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.di import NamedDependency

from server.services import Services


@get("/metrics", include_in_schema=False)
async def scrape(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[bytes]:
    scraping = services.scraping
    async with scraping.answer_turns.turn():
        body, content_type = await scraping.answer(request.headers.get("accept", ""))
    return Response(body, media_type=content_type)
