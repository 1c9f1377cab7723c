"""A generation job: as the API shows it (`Job`, read and cancelled here), and as a worker
holds it once claimed (`ClaimedJob`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

import asyncpg
import msgspec

from core.ids import Id
from core.sql import Executor, Queries
from generation.spend import Spend, spend_of

queries = Queries("generation")

Lane = Literal["interactive", "replenish"]
LANES: tuple[Lane, ...] = get_args(Lane)
JobStatus = Literal["pending", "generating", "awaiting_review", "completed", "failed", "cancelled"]


class Job(msgspec.Struct, frozen=True, kw_only=True):
    id: Id
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
    mission_id: Id | None
    instance_id: Id | None
    spend: Spend
    # What a pending job waits for before a claim may take it: "batch", its model call's line
    # in a batch at the provider; None when it waits only for its turn.
    waiting_for: Literal["batch"] | None = None


class ClaimedJob(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    attempt: int
    lane: Lane
    user_id: str | None
    track: str | None
    domain: str
    created_at: datetime

    def log_fields(self) -> dict[str, object]:
        """The structured fields of a log line about this job."""
        fields: dict[str, object] = {
            "job_id": self.id,
            "attempt": self.attempt,
            "lane": self.lane,
            "domain": self.domain,
        }
        if self.user_id is not None:
            fields["user_id"] = self.user_id
        return fields


class JobNotFound(Exception):
    def __init__(self, job_id: int | str) -> None:
        super().__init__(f"there is no job {str(job_id)!r}")


class JobNotPending(Exception):
    def __init__(self, job: Job) -> None:
        self.job = job
        super().__init__(f"job {job.id} is {job.status}; only a pending job can be cancelled")


class JobOfThePool(Exception):
    def __init__(self, job: Job) -> None:
        super().__init__(
            f"job {job.id} is the pool's own replenishment, not a user's interactive job; only "
            "an admin key may cancel it"
        )


async def get(connection: Executor, job_id: int, *, made_by: int | None = None) -> Job:
    """The job; with `made_by`, only if that API key made it."""
    row = await connection.fetchrow(queries["job_view"], job_id, made_by)
    if row is None:
        raise JobNotFound(job_id)
    return _job(row)


async def cancel(
    connection: Executor,
    job_id: int,
    *,
    made_by: int | None = None,
    lanes: tuple[Lane, ...] = LANES,
) -> Job:
    """Cancel a pending job of one of `lanes`; with `made_by`, only one that key made."""
    job = await get(connection, job_id, made_by=made_by)
    if job.lane not in lanes:
        raise JobOfThePool(job)
    if await connection.fetchval(queries["job_cancel_if_pending"], job_id) is None:
        raise JobNotPending(await get(connection, job_id))
    return await get(connection, job_id)


def _job(row: asyncpg.Record) -> Job:
    return Job(
        id=Id(row["id"]),
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
        mission_id=Id.of(row["mission_id"]),
        instance_id=Id.of(row["instance_id"]),
        spend=spend_of(row),
        waiting_for=None if row["waiting_for_call"] is None else "batch",
    )


class JobTarget(msgspec.Struct, frozen=True, kw_only=True):
    """What a job makes: a new mission (both None), another bug in the mission `variant_of`,
    or renderings of the variant `rendering_of`."""

    variant_of: int | None
    rendering_of: int | None


async def target(connection: Executor, job_id: int) -> JobTarget:
    row = await connection.fetchrow(queries["job_target"], job_id)
    if row is None:
        return JobTarget(variant_of=None, rendering_of=None)
    return JobTarget(variant_of=row["variant_of"], rendering_of=row["rendering_of"])
