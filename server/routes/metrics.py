"""GET /metrics (no auth): the Prometheus text format, or OpenMetrics when the scraper asks."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.di import NamedDependency
from prometheus_client.exposition import choose_encoder

from server.metrics import Scrape, read_snapshot
from server.services import Services


@get("/metrics", include_in_schema=False)
async def scrape(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Response[bytes]:
    snapshot = await read_snapshot(services)
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(Scrape(snapshot, services.metrics.registry)), media_type=content_type)
