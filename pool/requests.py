"""What a candidate app asks for a user: a mission instance served from stock, else the
interactive generation under way for them, else a new one enqueued; or a generation outright.
Each request runs in one transaction under its idempotency key, so a retry returns the first
answer and makes nothing new; a serve without a key is one statement, its own transaction.

A user's generation goes only to a domain of the track that some live worker can make (the
least stocked of those); when no worker can make any, the request is refused with each
domain's reason, and nothing is made, its idempotency key included."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from core import idempotency
from core.domains import Domain
from core.sql import Connection
from generation import admission, jobs, registry
from generation.admission import AdmissionLimits
from generation.metrics import QueueMetrics
from pool import serving


@dataclass(frozen=True)
class UserRequest:
    """Who asks for what: the API key `key_id` (answering for its idempotency keys under
    `caller`) asks for a mission for a user on a track, whose allowed domains are `domains`,
    in a cohort (or None) whose members share no mission beyond each domain's cohort_share."""

    user_id: str
    track: str
    domains: tuple[Domain, ...]
    key_id: int
    caller: str
    idempotency_key: str | None
    fingerprint: bytes
    cohort: str | None = None


class TrackCannotBeMade(Exception):
    """No live worker can make any domain of the track: each domain with its reason."""

    def __init__(self, track: str, reasons: dict[str, str]) -> None:
        why = "; ".join(f"{domain}: {reason}" for domain, reason in reasons.items())
        super().__init__(
            f"no worker can make a mission of track {track!r} now ({why}); start a worker that "
            "can make one of these domains (see GET /v1/workers), then retry"
        )


@dataclass(frozen=True)
class Answer:
    """An instance served, or the job enqueued instead; `first` when this request made it."""

    instance: serving.Instance | None
    job: jobs.Job | None
    first: bool


async def serve_or_enqueue(
    db: asyncpg.Pool,
    request: UserRequest,
    *,
    limits: AdmissionLimits,
    heartbeat_timeout: timedelta,
    metrics: QueueMetrics | None = None,
) -> Answer:
    """A worker is live while its heartbeat is younger than `heartbeat_timeout`."""

    async def serve(connection: Connection) -> serving.Instance | None:
        return await serving.serve(
            connection,
            user_id=request.user_id,
            track=request.track,
            domains=request.domains,
            cohort=request.cohort,
            created_by=request.key_id,
        )

    async def job(connection: Connection) -> idempotency.Remembered:
        # No stock (or none within the cohort's share): a user who asks again while their
        # generation is under way gets that job, whatever the request's key: a click more
        # never pays for a second generation. (With stock the serve answers at once and
        # costs nothing, and it never reads the jobs table, so serving never waits on the queue.)
        job_id = await admission.active_interactive_job(connection, request.user_id, request.track)
        if job_id is None:
            job_id = await _enqueue(connection, request, limits, heartbeat_timeout, metrics)
        return idempotency.Remembered(job_id=job_id, instance_id=None)

    async with db.acquire() as connection:
        if request.idempotency_key is None:
            # No key to remember beside it: the serve's statement is a transaction of its own,
            # one round trip where BEGIN and COMMIT around it made three.
            served = await serve(connection)
            if served is not None:
                return Answer(served, None, True)
            return await _answered(connection, request, job)

        served = None

        async def serve_else_job(connection: Connection) -> idempotency.Remembered:
            nonlocal served
            served = await serve(connection)
            if served is not None:
                return idempotency.Remembered(job_id=None, instance_id=served.id)
            return await job(connection)

        return await _answered(connection, request, serve_else_job, made_now=lambda: served)


async def enqueue_for_user(
    db: asyncpg.Pool,
    request: UserRequest,
    *,
    limits: AdmissionLimits,
    heartbeat_timeout: timedelta,
    metrics: QueueMetrics | None = None,
) -> Answer:
    async def create(connection: Connection) -> idempotency.Remembered:
        job_id = await _enqueue(connection, request, limits, heartbeat_timeout, metrics)
        return idempotency.Remembered(job_id=job_id, instance_id=None)

    async with db.acquire() as connection:
        return await _answered(connection, request, create)


async def _answered(
    connection: Connection,
    request: UserRequest,
    create: Callable[[Connection], Awaitable[idempotency.Remembered]],
    made_now: Callable[[], serving.Instance | None] = lambda: None,
) -> Answer:
    """`create` in a transaction under the request's idempotency key, then the answer; an
    instance `create` made is answered as `made_now` has it, without reading it again."""
    async with connection.transaction():
        made, first = await idempotency.once(
            connection,
            request.caller,
            request.idempotency_key,
            request.fingerprint,
            lambda: create(connection),
        )
    instance = made_now() if first else None
    if instance is not None:
        return Answer(instance, None, first)
    return await _answer(connection, made, first)


async def _enqueue(
    connection: Connection,
    request: UserRequest,
    limits: AdmissionLimits,
    heartbeat_timeout: timedelta,
    metrics: QueueMetrics | None,
) -> int:
    """An interactive generation in the allowed domain that needs it most, among those that a
    live worker can make."""
    fleet = await registry.live(connection, heartbeat_timeout=heartbeat_timeout)
    makeable = tuple(domain for domain in request.domains if fleet.can_make(domain.name))
    if not makeable:
        reasons = {
            domain.name: registry.explained(fleet.disabled_reasons(domain.name))
            for domain in request.domains
        }
        raise TrackCannotBeMade(request.track, reasons)
    return await admission.enqueue(
        connection,
        lane="interactive",
        user_id=request.user_id,
        track=request.track,
        domain=await serving.neediest_domain(connection, makeable),
        cohort=request.cohort,
        limits=limits,
        created_by=request.key_id,
        metrics=metrics,
    )


async def _answer(connection: Connection, made: idempotency.Remembered, first: bool) -> Answer:
    """After the commit: the answer to give, waking the dispatchers for a job made now."""
    if made.instance_id is not None:
        return Answer(await serving.get(connection, made.instance_id), None, first)
    assert made.job_id is not None
    if first:
        await admission.wake_dispatchers(connection)
    return Answer(None, await jobs.get(connection, made.job_id), first)
