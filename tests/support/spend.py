"""Model calls on the ledger of days past: each started on its day, then finished by the
ledger's own query, as the spend page reads them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import asyncpg

from core.sql import Queries

queries = Queries("generation")

# How many days ago it started, model, purpose, outcome, mode, takeovers, cost.
Call = tuple[int, str, str, str, str, int, Decimal]


async def write_calls(
    pool: asyncpg.Pool,
    job_id: int,
    attempt: int,
    calls: Iterable[Call],
    *,
    input_tokens: int,
    output_tokens: int,
) -> date:
    """Write the calls; the day they count back from, so a test never crosses midnight twice."""
    now = datetime.now(UTC)
    for number, (days_ago, model, purpose, outcome, mode, resumed, cost) in enumerate(
        calls, start=1
    ):
        call_id = await pool.fetchval(
            """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model,
                   started_at, mode, resumed)
               VALUES ($1, $2, $3, $4, 'openai', $5, $6, $7, $8) RETURNING id""",
            job_id,
            attempt,
            number,
            purpose,
            model,
            now - timedelta(days=days_ago),
            mode,
            resumed,
        )
        await pool.execute(
            queries["llm_call_finish"], call_id, input_tokens, output_tokens, cost, outcome, None
        )
    return now.date()
