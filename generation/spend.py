"""What model calls cost: the spend figures the ledger's sums name alike."""

from __future__ import annotations

import asyncpg
import msgspec


class Spend(msgspec.Struct, frozen=True, kw_only=True):
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    # Calls taken over from an earlier attempt instead of paid again, and what they cost.
    resumed_calls: int
    saved_usd: float

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            llm_calls=self.llm_calls + other.llm_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            resumed_calls=self.resumed_calls + other.resumed_calls,
            saved_usd=self.saved_usd + other.saved_usd,
        )


def spend_of(row: asyncpg.Record) -> Spend:
    """The spend columns that the queries summing the ledger name alike."""
    return Spend(
        llm_calls=row["llm_calls"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cost_usd=float(row["cost_usd"]),
        resumed_calls=row["resumed_calls"],
        saved_usd=float(row["saved_usd"]),
    )
