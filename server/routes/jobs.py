"""POST /v1/jobs, GET /v1/jobs/{id}, DELETE /v1/jobs/{id}: interactive generations."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody

from generation import jobs
from pool import requests
from server.auth import current_caller, requires
from server.routes.common import (
    RequiredIdempotencyKey,
    UserTrack,
    idempotency_key,
    made_by_scope,
    path_id,
    problems,
    user_request,
)
from server.services import Services


class JobEnvelope(msgspec.Struct):
    job: jobs.Job


@post(
    "/v1/jobs",
    guards=[requires("candidate_app")],
    status_code=202,
    responses={
        200: ResponseSpec(JobEnvelope, description="The same job: the key was seen before"),
        **problems(400, 401, 403, 409, 422, 429, 503),
    },
    summary="Enqueue an interactive generation",
    description="202 with the new job, in a domain of the track that a live worker can make; "
    "200 with the same job when the key was seen before; 503 when no worker can make any.",
)
async def create_job(
    request: Request[Any, Any, Any],
    data: JSONBody[UserTrack],
    services: NamedDependency[Services],
    key_header: RequiredIdempotencyKey = None,
) -> Response[JobEnvelope]:
    key = idempotency_key(key_header, required=True)
    asked = user_request(request, "POST /v1/jobs", data, key, services.domain_map)
    answer = await requests.enqueue_for_user(
        services.db,
        asked,
        limits=services.limits,
        heartbeat_timeout=services.settings.heartbeat_timeout,
        metrics=services.metrics,
    )
    assert answer.job is not None
    return Response(JobEnvelope(job=answer.job), status_code=202 if answer.first else 200)


@get(
    "/v1/jobs/{job_id:str}",
    guards=[requires("candidate_app")],
    responses=problems(400, 401, 403, 404, 503),
    summary="Read a job",
)
async def read_job(
    request: Request[Any, Any, Any], job_id: FromPath[str], services: NamedDependency[Services]
) -> jobs.Job:
    number = path_id(job_id, jobs.JobNotFound)
    return await jobs.get(services.db, number, made_by=made_by_scope(request, services))


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
) -> jobs.Job:
    lanes = jobs.LANES if current_caller(request).role == "admin" else ("interactive",)
    return await jobs.cancel(
        services.db,
        path_id(job_id, jobs.JobNotFound),
        made_by=made_by_scope(request, services),
        lanes=lanes,
    )
