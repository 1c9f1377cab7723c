"""The one error seam: every exception becomes an RFC 9457 problem-details answer here.

Domain exceptions map, in one table, to a status and a title; their message is the detail a
person reads to know what to change.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

import asyncpg
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.exceptions.http_exceptions import MethodNotAllowedException
from litestar.types import ExceptionHandlersMap

from core.idempotency import IdempotencyConflict
from core.sql import OUTAGE_ERRORS
from generation import gradings
from generation.admission import RETRY_AFTER_SECONDS, QueueFull, UserCapReached
from generation.jobs import JobNotFound, JobNotPending, JobOfThePool
from pool import submissions
from pool.requests import TrackCannotBeMade
from pool.serving import InstanceNotFound
from qa import trace
from qa.review import InvalidReview, MissionNotFound, MissionStateConflict, VariantNotFound
from server.deadline import RequestTimedOut

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
# What answers about an unavailable database tell clients to wait: it is usually back soon.
DATABASE_RETRY_AFTER_SECONDS = 5
# Two transactions that collided (a serialization failure, a deadlock): the loser changed
# nothing, and the same request a moment later succeeds.
CONTENTION_ERRORS = (asyncpg.SerializationError, asyncpg.DeadlockDetectedError)
CONTENTION_RETRY_AFTER_SECONDS = 1


class BadRequest(Exception):
    """Input that parsed but cannot be used (unknown track, over-long id, ...): 422."""


class MissingIdempotencyKey(Exception):
    pass


# exception -> (status, title, seconds for Retry-After or None); an exception with its own
# `retry_after` overrides the seconds.
DOMAIN_ERRORS: dict[type[Exception], tuple[int, str, int | None]] = {
    BadRequest: (422, "Invalid request", None),
    MissingIdempotencyKey: (400, "Idempotency-Key required", None),
    IdempotencyConflict: (409, "Idempotency-Key reused", None),
    UserCapReached: (429, "Too many active jobs for this user", RETRY_AFTER_SECONDS),
    QueueFull: (503, "Generation queue is full", RETRY_AFTER_SECONDS),
    TrackCannotBeMade: (503, "No worker can make this track", RETRY_AFTER_SECONDS),
    JobNotFound: (404, "Job not found", None),
    JobNotPending: (409, "Job is not pending", None),
    JobOfThePool: (403, "Not a user's job", None),
    InstanceNotFound: (404, "Instance not found", None),
    MissionNotFound: (404, "Mission not found", None),
    VariantNotFound: (404, "Variant not found", None),
    MissionStateConflict: (409, "Mission is not in the expected state", None),
    InvalidReview: (422, "Invalid review", None),
    trace.InvalidTrace: (422, "Text cannot be traced", None),
    RequestTimedOut: (503, "Request timed out", DATABASE_RETRY_AFTER_SECONDS),
    submissions.InvalidSubmission: (422, "Invalid submission", None),
    submissions.InstanceWithoutCode: (422, "Nothing to grade", None),
    submissions.NoGrader: (503, "No worker can grade this code", gradings.RETRY_AFTER_SECONDS),
    gradings.GradingUserCapReached: (
        429,
        "Too many submissions pending for this user",
        gradings.RETRY_AFTER_SECONDS,
    ),
    gradings.InstanceGradingsExhausted: (
        429,
        "Too many gradings of this instance",
        gradings.RETRY_AFTER_SECONDS,
    ),
    gradings.GradingQueueFull: (503, "Grading queue is full", gradings.RETRY_AFTER_SECONDS),
    gradings.SubmissionNotFound: (404, "Submission not found", None),
}


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    retry_after: int | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {
        "type": "about:blank",
        "status": status,
        "title": title,
        "detail": detail,
    }
    body.update(extra)
    headers = dict(headers or {})
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return Response(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _domain_error(_: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    for kind in type(error).__mro__:
        if kind in DOMAIN_ERRORS:
            status, title, retry_after = DOMAIN_ERRORS[kind]
            # An exception that knows when to come back says so.
            retry_after = getattr(error, "retry_after", retry_after)
            return problem(status, title, str(error), retry_after=retry_after)
    return _unexpected(_, error)


def _validation_error(
    request: Request[Any, Any, Any], error: ValidationException
) -> Response[dict[str, Any]]:
    errors = error.extra if isinstance(error.extra, list) else []
    reasons = "; ".join(
        f"{item.get('key') or 'body'}: {item.get('message')}"
        for item in errors
        if isinstance(item, dict)
    )
    detail = f"the request could not be read: {reasons or error.detail}"
    return problem(400, "Malformed request", detail, errors=errors)


def _http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[dict[str, Any]]:
    status = error.status_code
    title = HTTPStatus(status).phrase
    detail = error.detail if error.detail and error.detail != title else title
    if isinstance(error, NotFoundException) and detail == title:
        detail = (
            f"there is no route {request.url.path}; the API is described at /schema/openapi.json"
        )
    if status == 400 and not isinstance(error, ValidationException):
        detail = f"the request could not be read: {detail}; send a JSON body as documented"
    if isinstance(error, MethodNotAllowedException):
        allowed = (error.headers or {}).get("allow", "")
        detail = f"{request.method} is not allowed on {request.url.path}; allowed: {allowed}"
    return problem(status, title, detail, headers=error.headers)


def _database_unavailable(_: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    log.warning("database unavailable: %s: %s", type(error).__name__, error)
    return problem(
        503,
        "Database unavailable",
        "warmpool cannot reach its database right now; retry shortly",
        retry_after=DATABASE_RETRY_AFTER_SECONDS,
    )


def _contention(_: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    log.warning("concurrent update: %s: %s", type(error).__name__, error)
    return problem(
        503,
        "Concurrent update",
        "another request changed the same data at the same moment; retry shortly",
        retry_after=CONTENTION_RETRY_AFTER_SECONDS,
    )


def _unexpected(_: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    if isinstance(error, OUTAGE_ERRORS):
        return _database_unavailable(_, error)
    if isinstance(error, CONTENTION_ERRORS):
        return _contention(_, error)
    log.exception("unhandled error", exc_info=error)
    return problem(500, "Internal Server Error", "an unexpected error occurred; it has been logged")


def exception_handlers() -> ExceptionHandlersMap:
    handlers: ExceptionHandlersMap = dict.fromkeys(DOMAIN_ERRORS, _domain_error)
    handlers[ValidationException] = _validation_error
    handlers[HTTPException] = _http_error
    handlers[Exception] = _unexpected
    return handlers
