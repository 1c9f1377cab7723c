"""The chaos suite's verdict on tables written to break each promise it checks: a check that
could not fail would let any chaos run pass."""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from tests.chaos.verdict import judge
from tests.support.missions import add_mission


async def add_job(pool: asyncpg.Pool, status: str, attempt: int) -> int:
    job_id: int = await pool.fetchval(
        """INSERT INTO generation_jobs (lane, user_id, domain, status, attempt, fair_time)
           VALUES ('interactive', 'user-1', 'marketing-copy', $1, $2, now()) RETURNING id""",
        status,
        attempt,
    )
    return job_id


async def add_call(
    pool: asyncpg.Pool,
    job_id: int,
    attempt: int,
    *,
    outcome: str = "ok",
    orphaned: bool = False,
    cost: str = "0",
    mode: str = "background",
    named: bool = True,
) -> None:
    """A call; `named`: the provider's id of it is on its row."""
    await pool.execute(
        """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, outcome,
               orphaned, cost_usd, mode, provider_id)
           SELECT $1, $2, count(*) + 1, 'generate', 'openai', 'gpt-4o-mini', $3, $4, $5, $6,
                  CASE WHEN $7 THEN concat_ws('-', 'resp', $1::bigint, $2::int, count(*) + 1) END
           FROM llm_calls WHERE job_id = $1 AND attempt = $2""",
        job_id,
        attempt,
        outcome,
        orphaned,
        Decimal(cost),
        mode,
        named,
    )


async def test_a_history_that_keeps_every_promise_has_no_problem(pool: asyncpg.Pool) -> None:
    completed = await add_job(pool, "completed", 1)
    await add_call(pool, completed, 1, cost="0.001")
    # Released once mid-call (attempt 2), its call taken over and completed under attempt 3.
    released = await add_job(pool, "awaiting_review", 3)
    await add_call(pool, released, 1, cost="0.001")
    await pool.execute("UPDATE llm_calls SET resumed_by_attempt = 3 WHERE job_id = $1", released)
    # Its worker killed while the provider created the response: served, never named.
    swept = await add_job(pool, "failed", 1)
    await add_call(pool, swept, 1, outcome="started", named=False)
    # The same, booked at its ceiling later; the next attempt paid again, as nobody could
    # find the first call at the provider.
    paid_again = await add_job(pool, "completed", 2)
    await add_call(pool, paid_again, 1, outcome="failed", cost="0.01", orphaned=True, named=False)
    await add_call(pool, paid_again, 2, cost="0.001")
    accepted = {f"key-{job}": str(job) for job in (completed, released, swept, paid_again)}
    served = [
        (completed, "generate", 1),
        (released, "generate", 1),
        (swept, "generate", 1),
        *[(paid_again, "generate", 1)] * 2,
    ]

    verdict = await judge(pool, accepted, served)

    assert verdict.problems == []
    assert verdict.cut_off == 2
    assert verdict.by_status == {"completed": 2, "awaiting_review": 1, "failed": 1}
    assert verdict.released == 2


async def test_each_broken_promise_is_named(pool: asyncpg.Pool) -> None:
    left_pending = await add_job(pool, "pending", 0)
    billed_ahead = await add_job(pool, "failed", 1)
    await add_call(pool, billed_ahead, 2)
    run_twice = await add_job(pool, "failed", 1)
    await add_call(pool, run_twice, 1)
    await add_call(pool, run_twice, 1)
    completed_twice = await add_job(pool, "completed", 1)
    await add_call(pool, completed_twice, 1)
    for _ in range(2):
        await add_mission(pool, "marketing-copy", job_id=completed_twice)
    ended_by_a_lost_attempt = await add_job(pool, "completed", 3)
    await add_call(pool, ended_by_a_lost_attempt, 1)
    never_answered = await add_job(pool, "failed", 1)
    # Paid twice for its mission: once under attempt 1, its call lost, again under attempt 2.
    paid_twice = await add_job(pool, "completed", 2)
    await add_call(pool, paid_twice, 1, outcome="failed", cost="0.01")
    await add_call(pool, paid_twice, 2, cost="0.001")
    # Billed a call the model never served.
    billed_unserved = await add_job(pool, "failed", 1)
    await add_call(pool, billed_unserved, 1, outcome="failed", cost="0.01")
    jobs = (
        left_pending,
        billed_ahead,
        run_twice,
        completed_twice,
        ended_by_a_lost_attempt,
        paid_twice,
        billed_unserved,
    )
    accepted = {f"key-{job}": str(job) for job in jobs} | {"lost": "999999"}
    served = [(paid_twice, "generate", 1), (paid_twice, "generate", 1)]

    problems = (await judge(pool, accepted, served)).problems

    expected = {
        "jobs left unfinished": "{'pending': 1}",
        "accepted jobs missing from the table": "999999",
        "interactive jobs nobody was answered with": str(never_answered),
        "ledger rows outside their job's attempts": f"'job_id': {billed_ahead}",
        "attempts that ran the pipeline twice": f"'job_id': {run_twice}",
        "jobs completed twice": f"'job_id': {completed_twice}",
        "ended by an attempt without its own mission call": f"'id': {ended_by_a_lost_attempt}",
        "billed calls are not the calls the model served": f"{billed_unserved}: (1, 0, 0)",
        "paid twice for one purpose and try": f"({paid_twice}, 'generate', 1)",
    }
    assert len(problems) == len(expected), problems
    for what, names in expected.items():
        assert any(what in problem and names in problem for problem in problems), (what, problems)
