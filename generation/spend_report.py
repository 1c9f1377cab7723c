"""Where the money went: the ledger per UTC day, model, purpose, outcome and mode, and the
same spend summed over a window by each of those alone."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date

import msgspec

from core.sql import Executor, Queries
from generation.spend import Spend, spend_of

queries = Queries("generation")


class SpendGroup(msgspec.Struct, frozen=True, kw_only=True):
    day: date
    model: str
    purpose: str
    outcome: str
    mode: str
    spend: Spend


class DaySpend(msgspec.Struct, frozen=True, kw_only=True):
    day: date
    total: Spend
    # The day's groups, the costliest first.
    groups: list[SpendGroup]


async def by_day(connection: Executor, *, first: date, last: date) -> list[DaySpend]:
    """The days from `first` to `last` on which a model call started, the newest first."""
    rows = await connection.fetch(queries["llm_spend_by_day"], first, last)
    days: dict[date, list[SpendGroup]] = {}
    for row in rows:
        days.setdefault(row["day"], []).append(
            SpendGroup(
                day=row["day"],
                model=row["model"],
                purpose=row["purpose"],
                outcome=row["outcome"],
                mode=row["mode"],
                spend=spend_of(row),
            )
        )
    return [
        DaySpend(day=day, total=summed(group.spend for group in groups), groups=groups)
        for day, groups in days.items()
    ]


def summed(spends: Iterable[Spend]) -> Spend:
    total = Spend(
        llm_calls=0, input_tokens=0, output_tokens=0, cost_usd=0.0, resumed_calls=0, saved_usd=0.0
    )
    for spend in spends:
        total += spend
    return total


def totals_by(days: list[DaySpend], key: Callable[[SpendGroup], str]) -> list[tuple[str, Spend]]:
    """The window's spend per value of `key` (the model, say), the costliest first."""
    groups: dict[str, list[Spend]] = {}
    for day in days:
        for group in day.groups:
            groups.setdefault(key(group), []).append(group.spend)
    totals = [(name, summed(spends)) for name, spends in groups.items()]
    return sorted(totals, key=lambda item: (-item[1].cost_usd, item[0]))
