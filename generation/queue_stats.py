"""The queue at a glance: pending and generating jobs per lane, the oldest wait, and where
the daily budget stands."""

from __future__ import annotations

from datetime import datetime

import msgspec

from core.sql import Executor, Queries
from generation.budget import Budget, BudgetStatus
from generation.budget import status as budget_status

queries = Queries("generation")


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
