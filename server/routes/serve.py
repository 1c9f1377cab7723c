"""POST /v1/serve and the instances: what the candidate app calls on the hot path."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody

from pool import requests, serving
from server.auth import requires
from server.routes.common import (
    IdempotencyKey,
    ServeBody,
    idempotency_key,
    made_by_scope,
    path_id,
    problems,
    user_request,
)
from server.routes.jobs import JobEnvelope
from server.services import Services


class InstanceEnvelope(msgspec.Struct):
    instance: serving.Instance


class Instances(msgspec.Struct):
    instances: list[serving.Instance]


@post(
    "/v1/serve",
    guards=[requires("candidate_app")],
    status_code=200,
    responses={
        202: ResponseSpec(
            JobEnvelope, description="No stock: an interactive generation was enqueued"
        ),
        **problems(400, 401, 403, 409, 422, 429, 503),
    },
    summary="Serve a mission instance to a user",
    description="200 with an instance from the pool; 202 with a job when there is no stock, in "
    "a domain of the track that a live worker can make; 503 when no worker can make any.",
)
async def serve(
    request: Request[Any, Any, Any],
    data: JSONBody[ServeBody],
    services: NamedDependency[Services],
    key_header: IdempotencyKey = None,
) -> Response[InstanceEnvelope | JobEnvelope]:
    key = idempotency_key(key_header, required=False)
    asked = user_request(request, "POST /v1/serve", data, key, services.domain_map)
    answer = await requests.serve_or_enqueue(
        services.db,
        asked,
        limits=services.limits,
        heartbeat_timeout=services.settings.heartbeat_timeout,
        metrics=services.metrics,
    )
    if answer.instance is not None:
        return Response(InstanceEnvelope(instance=answer.instance), status_code=200)
    assert answer.job is not None
    return Response(JobEnvelope(job=answer.job), status_code=202)


@get(
    "/v1/instances/{instance_id:str}",
    guards=[requires("candidate_app")],
    responses=problems(400, 401, 403, 404, 503),
    summary="Read an instance",
)
async def read_instance(
    request: Request[Any, Any, Any],
    instance_id: FromPath[str],
    services: NamedDependency[Services],
) -> serving.Instance:
    number = path_id(instance_id, serving.InstanceNotFound)
    return await serving.get(services.db, number, made_by=made_by_scope(request, services))


@get(
    "/v1/users/{user_id:str}/instances",
    guards=[requires("candidate_app")],
    responses=problems(400, 401, 403, 503),
    summary="A user's instances, newest first",
)
async def user_instances(
    request: Request[Any, Any, Any], user_id: FromPath[str], services: NamedDependency[Services]
) -> Instances:
    made_by = made_by_scope(request, services)
    return Instances(instances=await serving.of_user(services.db, user_id, made_by=made_by))
