"""What model calls cost: the spend figures the ledger's sums name alike."""

from __future__ import annotations

import asyncpg
import msgspec


class Spend(msgspec.Struct, frozen=True, kw_only=True):
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def spend_of(row: asyncpg.Record) -> Spend:
    """The spend columns that the queries summing the ledger name alike."""
    return Spend(
        llm_calls=row["llm_calls"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        cost_usd=float(row["cost_usd"]),
    )
