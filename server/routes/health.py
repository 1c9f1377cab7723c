"""GET /healthz (the process runs) and GET /readyz (the database answers, the schema is current)."""

from __future__ import annotations

import asyncio

import msgspec
from litestar import Response, get
from litestar.di import NamedDependency

from core.sql import OUTAGE_ERRORS
from server import migrate
from server.errors import DATABASE_RETRY_AFTER_SECONDS, problem
from server.routes.common import PUBLIC, problems
from server.services import Services

# A probe answers within a few seconds either way: health checkers time out soon after.
PROBE_SECONDS = 2.0


class Health(msgspec.Struct):
    status: str


class Readiness(msgspec.Struct):
    status: str
    schema_version: int


@get("/healthz", summary="Liveness", security=PUBLIC, sync_to_thread=False)
def healthz() -> Health:
    return Health(status="ok")


@get("/readyz", summary="Readiness", security=PUBLIC, responses=problems(503))
async def readyz(services: NamedDependency[Services]) -> Response[Readiness]:
    try:
        # The acquire's timeout also bounds giving back a connection whose query timed out.
        async with services.db.acquire(timeout=PROBE_SECONDS) as connection:
            async with asyncio.timeout(PROBE_SECONDS):
                version = await migrate.current_version(connection)
    except OUTAGE_ERRORS as error:
        reason = str(error) or f"no answer within {PROBE_SECONDS:g}s"
        return problem(  # type: ignore[return-value]
            503,
            "Not ready",
            f"the database does not answer: {reason}",
            retry_after=DATABASE_RETRY_AFTER_SECONDS,
        )
    if version != migrate.LATEST_VERSION:
        return problem(  # type: ignore[return-value]
            503,
            "Not ready",
            f"the schema is at version {version}, this build needs {migrate.LATEST_VERSION}; "
            "run 'warmpool migrate'",
            retry_after=DATABASE_RETRY_AFTER_SECONDS,
        )
    return Response(Readiness(status="ready", schema_version=version))
