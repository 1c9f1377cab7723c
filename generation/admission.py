"""Admission to the queue: a job enqueued under the per-user cap and the depth limit, or
refused with the reason; and the NOTIFY that wakes the dispatchers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from core.sql import Connection, Executor, Queries
from generation.jobs import Lane

if TYPE_CHECKING:  # generation.metrics names the lanes
    from generation.metrics import QueueMetrics

queries = Queries("generation")

# How long a user's next pending job waits behind their previous one in the fair order:
# about one generation, so a user with three jobs gets one slot per round of other users.
FAIR_SHARE_STEP = timedelta(seconds=60)
# What 429 and 503 answers tell clients to wait: roughly one generation.
RETRY_AFTER_SECONDS = 30


class AdmissionLimits(msgspec.Struct, frozen=True, kw_only=True):
    user_cap: int
    max_pending: int
    replenish_max_pending: int


class UserCapReached(Exception):
    def __init__(self, user_id: str, cap: int) -> None:
        super().__init__(
            f"user {user_id!r} already has {cap} active jobs (pending, generating or awaiting "
            "review); wait for one to finish or cancel a pending one"
        )


class QueueFull(Exception):
    def __init__(self, pending: int, limit: int) -> None:
        super().__init__(
            f"the generation queue is full ({pending} pending jobs, limit {limit}); "
            f"retry in about {RETRY_AFTER_SECONDS} seconds"
        )


async def enqueue(
    connection: Connection,
    *,
    lane: Lane,
    user_id: str | None,
    track: str | None,
    domain: str,
    limits: AdmissionLimits,
    created_by: int | None = None,
    cohort: str | None = None,
    variant_of: int | None = None,
    rendering_of: int | None = None,
    now: datetime | None = None,
    metrics: QueueMetrics | None = None,
) -> int:
    """Insert a pending job, made by the API key `created_by` (None: the pool's own), for a
    user in `cohort`; with `variant_of`, a job that plants another bug in that mission; with
    `rendering_of`, a job that makes renderings of that variant. Call
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
        cohort,
        variant_of,
        rendering_of,
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


async def active_interactive_job(connection: Connection, user_id: str, track: str) -> int | None:
    """Inside a transaction: the user's interactive job for `track` still under way (pending,
    generating or awaiting review), if any. Takes the user's lock, so the answer holds until
    the transaction ends: no other enqueue for the user can commit meanwhile."""
    await connection.execute(queries["user_lock"], user_id)
    job_id: int | None = await connection.fetchval(
        queries["job_active_interactive_of_user_track"], user_id, track
    )
    return job_id


async def wake_dispatchers(connection: Executor) -> None:
    """Tell every worker there is new work; without it they find it on their next tick."""
    await connection.execute(queries["dispatchers_wake"])
