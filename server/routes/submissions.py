"""Grading a candidate's fix: POST /v1/instances/{id}/submissions, GET /v1/submissions/{id},
GET /v1/instances/{id}/submissions (role candidate_app), and GET /v1/qa/instances/{id}, the
gold a grader compares a fix with (role qa_reviewer)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, JSONBody

from core import idempotency
from generation import gradings
from pool import serving, submissions
from server.auth import current_caller, requires
from server.routes.common import (
    RequiredIdempotencyKey,
    idempotency_key,
    made_by_scope,
    path_id,
    problems,
)
from server.services import Services


class SubmissionEnvelope(msgspec.Struct):
    submission: gradings.Submission


class Submissions(msgspec.Struct):
    submissions: list[gradings.Submission]


@post(
    "/v1/instances/{instance_id:str}/submissions",
    guards=[requires("candidate_app")],
    status_code=202,
    responses={
        200: ResponseSpec(
            SubmissionEnvelope, description="The same submission: the key was seen before"
        ),
        **problems(400, 401, 403, 404, 409, 422, 429, 503),
    },
    summary="Submit a candidate's fix for grading",
    description="The candidate's version of the instance's code files, graded with the "
    "mission's visible and hidden tests in the untrusted sandbox. 202 with the new submission; "
    "200 with the same one for a key seen before; 422 naming a path that is not one of the "
    "instance's code files; 503 when the queue is full or no worker can grade the language.",
)
async def submit(
    request: Request[Any, Any, Any],
    instance_id: FromPath[str],
    data: JSONBody[submissions.Submit],
    services: NamedDependency[Services],
    key_header: RequiredIdempotencyKey = None,
) -> Response[SubmissionEnvelope]:
    number = path_id(instance_id, serving.InstanceNotFound)
    key = idempotency_key(key_header, required=True)
    assert key is not None
    caller = current_caller(request)
    submission, created = await submissions.submit(
        services.db,
        number,
        data,
        caller=caller.idempotency_scope,
        key=key,
        fingerprint=idempotency.fingerprint(f"POST /v1/instances/{number}/submissions", data),
        created_by=caller.key_id,
        made_by=made_by_scope(request, services),
        limits=services.grading_limits,
        heartbeat_timeout=services.settings.heartbeat_timeout,
    )
    return Response(SubmissionEnvelope(submission), status_code=202 if created else 200)


@get(
    "/v1/submissions/{submission_id:str}",
    guards=[requires("candidate_app")],
    responses=problems(400, 401, 403, 404, 503),
    summary="Read a submission and its verdict",
)
async def read_submission(
    request: Request[Any, Any, Any],
    submission_id: FromPath[str],
    services: NamedDependency[Services],
) -> gradings.Submission:
    number = path_id(submission_id, gradings.SubmissionNotFound)
    return await gradings.get(services.db, number, made_by=made_by_scope(request, services))


@get(
    "/v1/instances/{instance_id:str}/submissions",
    guards=[requires("candidate_app")],
    responses=problems(400, 401, 403, 404, 503),
    summary="An instance's submissions, newest first",
)
async def instance_submissions(
    request: Request[Any, Any, Any],
    instance_id: FromPath[str],
    services: NamedDependency[Services],
) -> Submissions:
    number = path_id(instance_id, serving.InstanceNotFound)
    made_by = made_by_scope(request, services)
    await serving.get(services.db, number, made_by=made_by)  # 404 for an unknown instance
    return Submissions(await gradings.of_instance(services.db, number, made_by=made_by))


@get(
    "/v1/qa/instances/{instance_id:str}",
    guards=[requires("qa_reviewer")],
    responses=problems(400, 401, 403, 404, 503),
    summary="An instance with its gold, bug summary and hint, for graders",
)
async def read_qa_instance(
    instance_id: FromPath[str], services: NamedDependency[Services]
) -> submissions.QaInstance:
    number = path_id(instance_id, serving.InstanceNotFound)
    return await submissions.for_grader(services.db, number)
