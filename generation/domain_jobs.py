"""What the replenisher counts from the jobs of each domain: the mission generations pending
and generating, the variant jobs and rendering jobs under way, how recent generations ended,
and the last replenish job a pass saw."""

from __future__ import annotations

from datetime import datetime

import msgspec

from core.sql import Executor, Queries

queries = Queries("generation")


class DomainJobs(msgspec.Struct, frozen=True, kw_only=True):
    pending: int
    generating: int
    # Of the generations created in the window: those that made a mission, those that failed.
    generated: int
    failed: int
    # Jobs planting another bug in an existing mission, pending or generating.
    variant_jobs: int
    # Jobs rendering a live variant, pending or generating.
    rendering_jobs: int
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
            variant_jobs=row["variant_jobs"],
            rendering_jobs=row["rendering_jobs"],
            last_replenish_job_id=row["last_replenish_job_id"],
        )
        for row in rows
    }
