"""Admission to the queue: enqueue under the per-user cap and the depth limit, cancel, read."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, get_args

import asyncpg
import msgspec

from core.ids import parse_id
from core.sql import Connection, Executor, Queries
from generation.budget import Budget, BudgetStatus
from generation.budget import status as budget_status

if TYPE_CHECKING:  # generation.metrics names this module's lanes
    from generation.metrics import QueueMetrics

queries = Queries("generation")

Lane = Literal["interactive", "replenish"]
LANES: tuple[Lane, ...] = get_args(Lane)
JobStatus = Literal["pending", "generating", "awaiting_review", "completed", "failed", "cancelled"]

# How long a user's next pending job waits behind their previous one in the fair order:
# about one generation, so a user with three jobs gets one slot per round of other users.
FAIR_SHARE_STEP = timedelta(seconds=60)
# What 429 and 503 answers tell clients to wait: roughly one generation.
RETRY_AFTER_SECONDS = 30


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    user_cap: int
    max_pending: int
    replenish_max_pending: int


class Spend(msgspec.Struct, frozen=True, kw_only=True):
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class Job(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    status: JobStatus
    lane: Lane
    user_id: str | None
    track: str | None
    domain: str
    queue_position: int | None
    attempt: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    mission_id: str | None
    instance_id: str | None
    spend: Spend


class QueueError(Exception):
    """A request the queue refuses; the server maps each kind to its HTTP answer."""


class UserCapReached(QueueError):
    def __init__(self, user_id: str, cap: int) -> None:
        super().__init__(
            f"user {user_id!r} already has {cap} active jobs (pending, generating or awaiting "
            "review); wait for one to finish or cancel a pending one"
        )


class QueueFull(QueueError):
    def __init__(self, pending: int, limit: int) -> None:
        super().__init__(
            f"the generation queue is full ({pending} pending jobs, limit {limit}); "
            f"retry in about {RETRY_AFTER_SECONDS} seconds"
        )


class JobNotFound(QueueError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"there is no job {job_id!r}")


class JobNotPending(QueueError):
    def __init__(self, job: Job) -> None:
        self.job = job
        super().__init__(f"job {job.id} is {job.status}; only a pending job can be cancelled")


class JobOfThePool(QueueError):
    def __init__(self, job: Job) -> None:
        super().__init__(
            f"job {job.id} is the pool's own replenishment, not a user's interactive job; only "
            "an admin key may cancel it"
        )


async def enqueue(
    connection: Connection,
    *,
    lane: Lane,
    user_id: str | None,
    track: str | None,
    domain: str,
    limits: Limits,
    created_by: int | None = None,
    now: datetime | None = None,
    metrics: QueueMetrics | None = None,
) -> int:
    """Insert a pending job, made by the API key `created_by` (None: the pool's own). Call
    inside a transaction, and `wake_dispatchers` after it. A refusal raises, counted in
    `metrics` when given."""
    if user_id is not None:
        await connection.execute(queries["user_lock"], user_id)
    row = await connection.fetchrow(
        queries["job_insert_within_limits"],
        lane,
        user_id,
        track,
        domain,
        limits.user_cap,
        limits.max_pending,
        FAIR_SHARE_STEP,
        now,
        limits.replenish_max_pending,
        created_by,
    )
    assert row is not None
    if row["job_id"] is not None:
        return int(row["job_id"])
    if row["active_jobs"] >= limits.user_cap:
        if metrics is not None:
            metrics.user_cap_refusals.inc()
        raise UserCapReached(user_id or "", limits.user_cap)
    if metrics is not None:
        metrics.sheds.labels(lane).inc()
    limit = limits.max_pending if lane == "interactive" else limits.replenish_max_pending
    raise QueueFull(row["pending"], limit)


async def wake_dispatchers(connection: Executor) -> None:
    """Tell every worker there is new work; without it they find it on their next tick."""
    await connection.execute(queries["dispatchers_wake"])


async def get(connection: Executor, job_id: str, *, made_by: int | None = None) -> Job:
    """The job; with `made_by`, only if that API key made it."""
    number = parse_id(job_id)
    row = await connection.fetchrow(queries["job_view"], number, made_by) if number else None
    if row is None:
        raise JobNotFound(job_id)
    return _job(row)


async def cancel(
    connection: Executor,
    job_id: str,
    *,
    made_by: int | None = None,
    lanes: tuple[Lane, ...] = LANES,
) -> Job:
    """Cancel a pending job of one of `lanes`; with `made_by`, only one that key made."""
    job = await get(connection, job_id, made_by=made_by)
    if job.lane not in lanes:
        raise JobOfThePool(job)
    if await connection.fetchval(queries["job_cancel_if_pending"], int(job.id)) is None:
        raise JobNotPending(await get(connection, job_id))
    return await get(connection, job_id)


def _optional_id(value: int | None) -> str | None:
    return None if value is None else str(value)


def _job(row: asyncpg.Record) -> Job:
    return Job(
        id=str(row["id"]),
        status=row["status"],
        lane=row["lane"],
        user_id=row["user_id"],
        track=row["track"],
        domain=row["domain"],
        queue_position=row["queue_position"],
        attempt=row["attempt"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=row["error"],
        mission_id=_optional_id(row["mission_id"]),
        instance_id=_optional_id(row["instance_id"]),
        spend=spend_of(row),
    )


def spend_of(row: asyncpg.Record) -> Spend:
    """The spend columns that the queries summing the ledger name alike."""
    return Spend(
        llm_calls=row["llm_calls"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cost_usd=float(row["cost_usd"]),
    )


class LaneStats(msgspec.Struct, frozen=True, kw_only=True):
    pending: int
    generating: int
    oldest_pending_age_s: float | None


class QueueStats(msgspec.Struct, frozen=True, kw_only=True):
    pending: int
    generating: int
    global_cap: int
    max_pending: int
    oldest_pending_age_s: float | None
    lanes: dict[str, LaneStats]
    # Where the daily spend budget stands; null when none is configured.
    budget: BudgetStatus | None


async def stats(
    connection: Executor,
    *,
    global_cap: int,
    max_pending: int,
    budget: Budget | None = None,
    now: datetime | None = None,
) -> QueueStats:
    lanes = {
        row["lane"]: LaneStats(
            pending=row["pending"],
            generating=row["generating"],
            oldest_pending_age_s=_optional_float(row["oldest_pending_age_s"]),
        )
        for row in await connection.fetch(queries["queue_stats"], now)
    }
    ages = [
        lane.oldest_pending_age_s
        for lane in lanes.values()
        if lane.oldest_pending_age_s is not None
    ]
    return QueueStats(
        pending=sum(lane.pending for lane in lanes.values()),
        generating=sum(lane.generating for lane in lanes.values()),
        global_cap=global_cap,
        max_pending=max_pending,
        oldest_pending_age_s=max(ages, default=None),
        lanes=lanes,
        budget=None if budget is None else await budget_status(connection, budget, now),
    )


def _optional_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


async def awaiting_review_of(connection: Connection, mission_id: int) -> list[int]:
    """Inside a transaction: the ids of the jobs waiting on this mission's review, locked."""
    rows = await connection.fetch(queries["jobs_awaiting_review_of_mission"], mission_id)
    return [row["id"] for row in rows]


async def complete_awaiting_review(
    connection: Connection, job_id: int, instance_id: int | None
) -> bool:
    done = await connection.fetchval(
        queries["job_complete_if_awaiting_review"], job_id, instance_id
    )
    return done is not None


async def fail_awaiting_review(connection: Connection, mission_id: int, reason: str) -> int:
    failed = await connection.fetch(
        queries["jobs_fail_if_awaiting_review_of_mission"], mission_id, reason
    )
    return len(failed)


class DomainJobs(msgspec.Struct, frozen=True, kw_only=True):
    pending: int
    generating: int
    # Of the generations created in the window: those that made a mission, those that failed.
    generated: int
    failed: int
    last_replenish_job_id: int | None


async def jobs_by_domain(
    connection: Executor, domains: list[str], *, since: datetime, now: datetime
) -> dict[str, DomainJobs]:
    rows = await connection.fetch(queries["jobs_by_domain"], domains, since, now)
    return {
        row["domain"]: DomainJobs(
            pending=row["pending"],
            generating=row["generating"],
            generated=row["generated"],
            failed=row["failed"],
            last_replenish_job_id=row["last_replenish_job_id"],
        )
        for row in rows
    }
