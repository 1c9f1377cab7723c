"""POST /v1/jobs, GET /v1/jobs/{id}, DELETE /v1/jobs/{id}: interactive generations."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody

from core import idempotency
from generation import queue
from server.auth import current_caller, requires
from server.routes.common import (
    UserTrack,
    idempotency_key,
    made_by_scope,
    problems,
    validate_user_track,
)
from server.routes.interactive import enqueue_for_user
from server.services import Services


class JobEnvelope(msgspec.Struct):
    job: queue.Job


@post(
    "/v1/jobs",
    guards=[requires("candidate_app")],
    status_code=202,
    responses={
        200: ResponseSpec(JobEnvelope, description="The same job: the key was seen before"),
        **problems(400, 401, 403, 409, 422, 429, 503),
    },
    summary="Enqueue an interactive generation",
    description="202 with the new job; 200 with the same job when the key was seen before.",
)
async def create_job(
    request: Request[Any, Any, Any],
    data: JSONBody[UserTrack],
    services: NamedDependency[Services],
    key_header: Annotated[str | None, HeaderParameter(name="Idempotency-Key")] = None,
) -> Response[JobEnvelope]:
    key = idempotency_key(key_header, required=True)
    assert key is not None
    domains = validate_user_track(data, services.domain_map)
    caller = current_caller(request)
    scope = caller.idempotency_scope
    fingerprint = idempotency.fingerprint("POST /v1/jobs", data)
    async with services.pool.acquire() as connection:
        async with connection.transaction():
            remembered = await idempotency.claim(connection, scope, key, fingerprint)
            if remembered is None:
                job_id = await enqueue_for_user(
                    connection, services, data, domains, created_by=caller.key_id
                )
                await idempotency.remember(connection, scope, key, job_id=job_id)
                status = 202
            else:
                assert remembered.job_id is not None  # the fingerprint names this route
                job_id, status = remembered.job_id, 200
        if status == 202:
            await queue.wake_dispatchers(connection)
        job = await queue.get(connection, str(job_id))
    return Response(JobEnvelope(job=job), status_code=status)


@get(
    "/v1/jobs/{job_id:str}",
    guards=[requires("candidate_app")],
    responses=problems(400, 401, 403, 404, 503),
    summary="Read a job",
)
async def read_job(
    request: Request[Any, Any, Any], job_id: FromPath[str], services: NamedDependency[Services]
) -> queue.Job:
    return await queue.get(services.pool, job_id, made_by=made_by_scope(request, services))


@delete(
    "/v1/jobs/{job_id:str}",
    guards=[requires("candidate_app")],
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 503),
    summary="Cancel a pending job",
    description="A user's interactive job; only an admin key may cancel the pool's own.",
)
async def cancel_job(
    request: Request[Any, Any, Any], job_id: FromPath[str], services: NamedDependency[Services]
) -> queue.Job:
    lanes = queue.LANES if current_caller(request).role == "admin" else ("interactive",)
    return await queue.cancel(
        services.pool, job_id, made_by=made_by_scope(request, services), lanes=lanes
    )
