"""POST /v1/serve and the instances: what the candidate app calls on the hot path."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody

from core import idempotency
from core.sql import Connection
from generation import queue
from pool import serving
from server.auth import current_caller, requires
from server.routes.common import (
    UserTrack,
    idempotency_key,
    made_by_scope,
    problems,
    validate_user_track,
)
from server.routes.interactive import enqueue_for_user
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
    description="200 with an instance from the pool; 202 with a job when there is no stock.",
)
async def serve(
    request: Request[Any, Any, Any],
    data: JSONBody[UserTrack],
    services: NamedDependency[Services],
    key_header: Annotated[str | None, HeaderParameter(name="Idempotency-Key")] = None,
) -> Response[InstanceEnvelope | JobEnvelope]:
    key = idempotency_key(key_header, required=False)
    domains = validate_user_track(data, services.domain_map)
    caller = current_caller(request)
    scope = caller.idempotency_scope
    fingerprint = idempotency.fingerprint("POST /v1/serve", data)
    async with services.pool.acquire() as connection:
        async with connection.transaction():
            remembered = None
            if key is not None:
                remembered = await idempotency.claim(connection, scope, key, fingerprint)
            if remembered is None:
                instance = await serving.serve(
                    connection,
                    user_id=data.user_id,
                    track=data.track,
                    domains=domains,
                    created_by=caller.key_id,
                )
                job_id = None
                if instance is None:
                    job_id = await enqueue_for_user(
                        connection, services, data, domains, created_by=caller.key_id
                    )
                if key is not None:
                    instance_id = None if instance is None else int(instance.id)
                    await idempotency.remember(
                        connection, scope, key, job_id=job_id, instance_id=instance_id
                    )
        if remembered is not None:
            return await _first_answer(connection, remembered)
        if instance is not None:
            return Response(InstanceEnvelope(instance=instance), status_code=200)
        await queue.wake_dispatchers(connection)
        job = await queue.get(connection, str(job_id))
    return Response(JobEnvelope(job=job), status_code=202)


async def _first_answer(
    connection: Connection, remembered: idempotency.Remembered
) -> Response[InstanceEnvelope | JobEnvelope]:
    if remembered.instance_id is not None:
        instance = await serving.get(connection, str(remembered.instance_id))
        return Response(InstanceEnvelope(instance=instance), status_code=200)
    job = await queue.get(connection, str(remembered.job_id))
    return Response(JobEnvelope(job=job), status_code=202)


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
    return await serving.get(services.pool, instance_id, made_by=made_by_scope(request, services))


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
    return Instances(instances=await serving.of_user(services.pool, user_id, made_by=made_by))
