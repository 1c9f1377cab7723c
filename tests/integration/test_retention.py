"""Retention on the real database: old finished jobs go in small batches, oldest first; live
jobs and young finished ones stay; the ledger keeps every row of the jobs it deleted; the rows
of workers silent as long go too.

The batches are seen from the database: a statement-level trigger records what each DELETE
on generation_jobs removed."""

import math
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import asyncpg
import pytest

from generation import retention
from generation.retention import BATCH, Retention

WEEK = timedelta(days=7)


async def record_deletes(pool: asyncpg.Pool) -> None:
    await pool.execute(
        """CREATE TABLE deleted_batches (
               statement  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
               jobs       int NOT NULL,
               oldest     timestamptz,
               newest     timestamptz
           );
           CREATE FUNCTION record_deleted_batch() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN
               INSERT INTO deleted_batches (jobs, oldest, newest)
               SELECT count(*), min(finished_at), max(finished_at) FROM deleted;
               RETURN NULL;
           END
           $$;
           CREATE TRIGGER record_deleted_batch AFTER DELETE ON generation_jobs
               REFERENCING OLD TABLE AS deleted
               FOR EACH STATEMENT EXECUTE FUNCTION record_deleted_batch()"""
    )


async def deleted_batches(pool: asyncpg.Pool) -> list[asyncpg.Record]:
    return await pool.fetch("SELECT jobs, oldest, newest FROM deleted_batches ORDER BY statement")


async def add_finished_jobs(pool: asyncpg.Pool, count: int, newest: datetime) -> set[int]:
    """`count` finished jobs of every finished status, the later inserted the older, so that
    id order is not finished_at order."""
    rows = await pool.fetch(
        """INSERT INTO generation_jobs (lane, domain, status, fair_time, finished_at)
           SELECT 'replenish', 'python-backend',
                  (ARRAY['completed', 'failed', 'cancelled'])[n % 3 + 1],
                  $1::timestamptz - n * interval '1 second', $1 - n * interval '1 second'
           FROM generate_series(0, $2::int - 1) n
           RETURNING id""",
        newest,
        count,
    )
    return {row["id"] for row in rows}


def spend_per_job(rows: list[asyncpg.Record]) -> dict[int, tuple[int, object]]:
    return {row["job_id"]: (row["calls"], row["cost_usd"]) for row in rows}


async def test_old_finished_jobs_go_in_batches_and_their_spend_stays(pool: asyncpg.Pool) -> None:
    now = datetime.now(UTC)
    old = now - WEEK - timedelta(hours=1)
    await record_deletes(pool)
    old_ids = await add_finished_jobs(pool, BATCH * 2 + 7, old)
    young_or_live = await pool.fetch(
        """INSERT INTO generation_jobs (lane, user_id, domain, status, fair_time, finished_at)
           VALUES
           -- Finished, but younger than the retention age (by a minute for the last one).
           ('replenish', NULL, 'python-backend', 'completed', $1, $1),
           ('replenish', NULL, 'python-backend', 'failed', $1, $1),
           ('replenish', NULL, 'python-backend', 'cancelled', $2, $2),
           -- Live, however old; finished_at is set on these only to show that retention
           -- goes by status and not by timestamp alone.
           ('replenish', NULL, 'python-backend', 'pending', $3, $3),
           ('replenish', NULL, 'python-backend', 'generating', $3, $3),
           ('interactive', 'u', 'python-backend', 'awaiting_review', $3, $3),
           ('replenish', NULL, 'python-backend', 'pending', $3, NULL)
           RETURNING id, status""",
        now - timedelta(hours=1),
        now - WEEK + timedelta(minutes=1),
        old,
    )
    # Two model calls per job, their cost differing from job to job.
    await pool.execute(
        """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model, outcome,
               cost_usd)
           SELECT id, call, 1, 'generate', 'test', 'm', 'ok', (id % 97) / 100.0
           FROM generation_jobs, generate_series(1, 2) call"""
    )
    await pool.execute(
        "INSERT INTO idempotency_keys (caller, key, fingerprint, created_at) VALUES ('c', 'old', '', $1), ('c', 'new', '', $2)",
        old,
        now,
    )
    spend_query = """SELECT job_id, count(*) AS calls, sum(cost_usd) AS cost_usd
                     FROM llm_calls GROUP BY job_id"""
    spend_before = spend_per_job(await pool.fetch(spend_query))

    deleted = await Retention(pool, keep_for=WEEK).run_once(now)

    assert deleted == BATCH * 2 + 7
    batches = [batch for batch in await deleted_batches(pool) if batch["jobs"]]
    # ceil(N / BATCH) batches, the oldest jobs first.
    assert [batch["jobs"] for batch in batches] == [BATCH, BATCH, 7]
    spans = [(batch["oldest"], batch["newest"]) for batch in batches]
    assert all(earlier[1] <= later[0] for earlier, later in pairwise(spans)), spans
    remaining = await pool.fetch("SELECT id, status FROM generation_jobs ORDER BY id")
    assert [(row["id"], row["status"]) for row in remaining] == [
        (row["id"], row["status"]) for row in young_or_live
    ]
    # The ledger keeps every row of the deleted jobs: each job's spend sums as before.
    spend_after = spend_per_job(await pool.fetch(spend_query))
    assert spend_after == spend_before
    assert old_ids <= spend_after.keys()
    assert [row["key"] for row in await pool.fetch("SELECT key FROM idempotency_keys")] == ["new"]


@pytest.mark.parametrize("old_jobs", [0, 4, 10, 23])
async def test_a_pass_deletes_n_old_jobs_in_ceil_n_over_the_batch_size_batches(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, old_jobs: int
) -> None:
    batch = 5
    monkeypatch.setattr(retention, "BATCH", batch)
    now = datetime.now(UTC)
    await record_deletes(pool)
    await add_finished_jobs(pool, old_jobs, now - WEEK - timedelta(hours=1))
    young = await add_finished_jobs(pool, 3, now - timedelta(hours=1))

    deleted = await Retention(pool, keep_for=WEEK).run_once(now)

    assert deleted == old_jobs
    statements = [row["jobs"] for row in await deleted_batches(pool)]
    batches = [size for size in statements if size]
    assert len(batches) == math.ceil(old_jobs / batch)
    full, rest = divmod(old_jobs, batch)
    assert batches == [batch] * full + ([rest] if rest else [])
    # At most one more DELETE, to find that nothing is left (the pass stops on a short batch).
    assert statements[len(batches) :] in ([], [0])
    remaining = await pool.fetch("SELECT id FROM generation_jobs")
    assert {row["id"] for row in remaining} == young


async def test_the_rows_of_workers_silent_past_the_retention_are_deleted(
    pool: asyncpg.Pool,
) -> None:
    now = datetime.now(UTC)
    for name, silent_for in (("retired", WEEK + timedelta(minutes=1)), ("stopped", timedelta(1))):
        await pool.execute(
            """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots)
               VALUES ($1, $1 || ':box:1', $2::timestamptz, $2, 1)""",
            name,
            now - silent_for,
        )

    await Retention(pool, keep_for=WEEK).run_once(now)

    assert [row["name"] for row in await pool.fetch("SELECT name FROM workers")] == ["stopped"]
