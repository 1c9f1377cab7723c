"""GET /metrics: the Prometheus text format, or OpenMetrics when the scraper asks. Open to
anyone unless WARMPOOL_METRICS_TOKEN is set; then only to `Authorization: Bearer <token>`.
Scrapes are answered one at a time, in turns spaced apart (`server.metrics.Scraping`)."""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Request, Response, get
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException

from server.services import Services


@get("/metrics", include_in_schema=False)
async def scrape(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[bytes]:
    scraping = services.scraping
    token = services.settings.metrics_token
    if token is not None and not _bears(request.headers.get("authorization", ""), token):
        async with scraping.refusal_turns.turn():
            raise NotAuthorizedException(
                detail="this server's /metrics needs its token (WARMPOOL_METRICS_TOKEN) as "
                "'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
    async with scraping.answer_turns.turn():
        body, content_type = await scraping.answer(request.headers.get("accept", ""))
    return Response(body, media_type=content_type)


def _bears(header: str, token: str) -> bool:
    scheme, _, sent = header.partition(" ")
    # Compared in constant time: how long a refusal takes tells nothing about the token.
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())
