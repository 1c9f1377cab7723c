"""GET /healthz (the process runs) and GET /readyz (the database answers, the schema is current)."""

from __future__ import annotations

import msgspec
from litestar import Response, get
from litestar.di import NamedDependency

from server import migrate
from server.errors import DATABASE_UNAVAILABLE, problem
from server.routes.common import PUBLIC, problems
from server.services import Services


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
        async with services.pool.acquire(timeout=2) as connection:
            version = await migrate.current_version(connection)
    except DATABASE_UNAVAILABLE as error:
        return problem(503, "Not ready", f"the database does not answer: {error}", retry_after=5)  # type: ignore[return-value]
    if version != migrate.LATEST_VERSION:
        return problem(  # type: ignore[return-value]
            503,
            "Not ready",
            f"the schema is at version {version}, this build needs {migrate.LATEST_VERSION}; "
            "run 'warmpool migrate'",
            retry_after=5,
        )
    return Response(Readiness(status="ready", schema_version=version))
