"""The daily spend budget as admission control.

At claim time each job reserves its worst-case cost, in the same transaction and under the
same dispatch lock as the claim; the reservation counts until the job ends, minus what the
job has already spent (the ledger is the real cost). A claim must fit today's spend plus all
outstanding reservations under the budget; replenishment must also leave the interactive
reserve untouched, so it stops first.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import msgspec

from core.sql import Executor, Queries

queries = Queries("generation")


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    daily_usd: Decimal
    # What one job may cost at most: every model call of the pipeline at its ceiling.
    job_reservation_usd: Decimal
    # The part of the daily budget only interactive work may use.
    interactive_reserve_usd: Decimal


class BudgetStatus(msgspec.Struct, frozen=True, kw_only=True):
    daily_usd: float
    spent_today_usd: float
    reserved_usd: float
    remaining_usd: float
    job_reservation_usd: float
    interactive_reserve_usd: float
    # Replenishment claims nothing more: what is left is the interactive reserve.
    replenish_paused: bool
    # Nothing more is claimed today.
    exhausted: bool


def claim_parameters(budget: Budget | None) -> tuple[Decimal | None, Decimal, Decimal]:
    if budget is None:
        return None, Decimal(0), Decimal(0)
    return budget.daily_usd, budget.job_reservation_usd, budget.interactive_reserve_usd


async def status(connection: Executor, budget: Budget, now: datetime | None = None) -> BudgetStatus:
    row = await connection.fetchrow(queries["budget_today"], now)
    assert row is not None
    spent, reserved = Decimal(row["spent_usd"]), Decimal(row["reserved_usd"])
    remaining = budget.daily_usd - spent - reserved
    return BudgetStatus(
        daily_usd=float(budget.daily_usd),
        spent_today_usd=float(spent),
        reserved_usd=float(reserved),
        remaining_usd=float(remaining),
        job_reservation_usd=float(budget.job_reservation_usd),
        interactive_reserve_usd=float(budget.interactive_reserve_usd),
        replenish_paused=remaining - budget.interactive_reserve_usd < budget.job_reservation_usd,
        exhausted=remaining < budget.job_reservation_usd,
    )
