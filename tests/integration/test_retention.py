from datetime import UTC, datetime, timedelta

import asyncpg

from generation.retention import BATCH, Retention

WEEK = timedelta(days=7)


async def test_old_finished_jobs_go_in_batches_and_their_spend_stays(pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC)
    old = now - WEEK - timedelta(hours=1)
    await pool.execute(
        """INSERT INTO generation_jobs (lane, domain, status, fair_time, finished_at)
           SELECT 'replenish', 'python-backend', (ARRAY['completed', 'failed', 'cancelled'])[n % 3 + 1],
                  $1, $1
           FROM generate_series(1, $2::int) n""",
        old,
        BATCH * 2 + 7,
    )
    await pool.execute(
        """INSERT INTO generation_jobs (lane, user_id, domain, status, fair_time, finished_at) VALUES
           ('replenish', NULL, 'python-backend', 'completed', $1, $1),
           ('replenish', NULL, 'python-backend', 'pending', $2, NULL),
           ('interactive', 'u', 'python-backend', 'awaiting_review', $2, NULL)""",
        now - timedelta(hours=1),
        old,
    )
    await pool.execute(
        """INSERT INTO llm_calls (job_id, attempt, purpose, provider, model, outcome, cost_usd)
           SELECT id, 1, 'generate', 'test', 'm', 'ok', 0.5 FROM generation_jobs"""
    )
    await pool.execute(
        "INSERT INTO idempotency_keys (caller, key, fingerprint, created_at) VALUES ('c', 'old', '', $1), ('c', 'new', '', $2)",
        old,
        now,
    )
    spend_before = await pool.fetchval("SELECT sum(cost_usd) FROM llm_calls")

    deleted = await Retention(pool, keep_for=WEEK).run_once(now)

    assert deleted == BATCH * 2 + 7
    remaining = await pool.fetch("SELECT status FROM generation_jobs ORDER BY id")
    assert [row["status"] for row in remaining] == ["completed", "pending", "awaiting_review"]
    assert await pool.fetchval("SELECT sum(cost_usd) FROM llm_calls") == spend_before
    assert [row["key"] for row in await pool.fetch("SELECT key FROM idempotency_keys")] == ["new"]
