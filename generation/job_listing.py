"""The jobs as operators look through them: a page of the newest of some statuses and lanes, in
one domain or of one user, and each domain's queue at a glance (what is pending and generating
per lane, and its last failure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from core.sql import Executor, Queries
from generation.jobs import LANES, JobStatus, Lane

queries = Queries("generation")


class JobFilter(msgspec.Struct, frozen=True, kw_only=True):
    statuses: tuple[JobStatus, ...]
    lanes: tuple[Lane, ...] = LANES
    domain: str | None = None
    user_id: str | None = None
    # Only jobs older than this one: the next page.
    before: int | None = None


class ListedJob(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    status: JobStatus
    lane: Lane
    user_id: str | None
    track: str | None
    domain: str
    attempt: int
    worker_id: str | None
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    error: str | None
    mission_id: int | None
    instance_id: int | None
    # Pending, but waiting for this model call's line in a batch: no claim takes it meanwhile.
    waiting_for_call: int | None
    # Its model calls, every attempt's, and what they cost.
    llm_calls: int
    cost_usd: float


class JobPage(msgspec.Struct, frozen=True, kw_only=True):
    jobs: list[ListedJob]
    # Where the next page starts (its `before`), when there are older jobs.
    older_than: int | None


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    job_id: int
    finished_at: datetime | None
    error: str | None


class LaneAtAGlance(msgspec.Struct, frozen=True, kw_only=True):
    domain: str
    lane: Lane
    pending: int
    generating: int
    last_failure: Failure | None


async def page(
    connection: Executor, jobs: JobFilter, *, every_domain: Sequence[str], size: int
) -> JobPage:
    """At most `size` jobs, newest first, of `every_domain` unless the filter names one."""
    rows = await connection.fetch(
        queries["jobs_listed"],
        list(jobs.statuses),
        list(jobs.lanes),
        [jobs.domain] if jobs.domain else list(every_domain),
        jobs.before,
        size + 1,
        jobs.user_id,
    )
    listed = [
        ListedJob(**(dict(row) | {"cost_usd": float(row["cost_usd"])})) for row in rows[:size]
    ]
    return JobPage(jobs=listed, older_than=listed[-1].id if len(rows) > size else None)


async def at_a_glance(connection: Executor, domains: Sequence[str]) -> list[LaneAtAGlance]:
    """Each of `domains` on each lane, in domain order."""
    rows = await connection.fetch(queries["jobs_at_a_glance_by_domain"], list(domains))
    return [
        LaneAtAGlance(
            domain=row["domain"],
            lane=row["lane"],
            pending=row["pending"],
            generating=row["generating"],
            last_failure=None
            if row["failed_job_id"] is None
            else Failure(
                job_id=row["failed_job_id"], finished_at=row["failed_at"], error=row["failure"]
            ),
        )
        for row in rows
    ]
