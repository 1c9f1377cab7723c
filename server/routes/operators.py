"""Operator routes (role admin): GET /v1/queue."""

from __future__ import annotations

from litestar import get
from litestar.di import NamedDependency

from generation import queue
from server.auth import requires
from server.routes.common import problems
from server.services import Services


@get("/v1/queue", guards=[requires("admin")], responses=problems(401, 403), summary="Queue depth")
async def read_queue(services: NamedDependency[Services]) -> queue.QueueStats:
    return await queue.stats(
        services.pool,
        global_cap=services.settings.global_cap,
        max_pending=services.settings.max_pending,
    )
