"""What POST /v1/jobs and POST /v1/serve share: an interactive generation for a waiting user."""

from __future__ import annotations

from core.domains import Domain
from core.sql import Connection
from generation import queue
from pool import serving
from server.routes.common import UserTrack
from server.services import Services


async def enqueue_for_user(
    connection: Connection,
    services: Services,
    request: UserTrack,
    domains: tuple[Domain, ...],
    *,
    created_by: int,
) -> int:
    """Inside a transaction: enqueue a generation in the allowed domain that needs it most,
    made by the API key `created_by`."""
    return await queue.enqueue(
        connection,
        lane="interactive",
        user_id=request.user_id,
        track=request.track,
        domain=await serving.neediest_domain(connection, domains),
        limits=services.limits,
        created_by=created_by,
        metrics=services.metrics,
    )
