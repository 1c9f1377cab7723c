"""Reviewer sessions as rows on the real database: a session lives its lifetime from sign-in and
not a moment more, however it is used; signing out ends it; a revoked or deleted key ends its
sessions; retention deletes the ones that stopped a week ago; the lookup every page makes reads
both tables by primary key, however many sessions the table holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from server import reviewer_sessions, runtime
from server.auth import Caller, Role
from server.reviewer_sessions import KEEP_STOPPED_FOR, SessionRetention
from server.runtime import WorkerRuntime
from server.settings import Settings
from tests.support.fleet import EVERY_DOMAIN
from tests.support.generators import Gated
from tests.support.plans import nodes
from tests.support.polling import eventually
from tests.support.server import key_id

LIFETIME = timedelta(hours=12)
T0 = datetime(2025, 3, 1, 8, tzinfo=UTC)
SECOND = timedelta(seconds=1)


async def test_a_session_lives_its_lifetime_from_sign_in_and_not_a_moment_more(
    pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    reviewer = await key_id(pool, "qa_reviewer")
    token = await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME, now=T0)
    signed_in = Caller(key_id=reviewer, name="test-qa_reviewer", role="qa_reviewer")
    # Used every hour, to the last second: each use leaves its end where sign-in put it.
    for moment in [T0 + timedelta(hours=hour) for hour in range(12)] + [T0 + LIFETIME - SECOND]:
        assert await reviewer_sessions.signed_in_key(pool, token, now=moment) == signed_in
    row = await pool.fetchrow("SELECT created_at, expires_at FROM reviewer_sessions")
    assert row is not None
    assert tuple(row) == (T0, T0 + LIFETIME)
    assert await reviewer_sessions.signed_in_key(pool, token, now=T0 + LIFETIME) is None
    assert await reviewer_sessions.signed_in_key(pool, "a-token-nobody-was-given", now=T0) is None


async def test_signing_out_ends_that_session_only(
    pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    reviewer = await key_id(pool, "qa_reviewer")
    laptop = await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME, now=T0)
    phone = await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME, now=T0)
    await reviewer_sessions.end(pool, laptop, now=T0 + timedelta(hours=1))
    assert await reviewer_sessions.signed_in_key(pool, laptop, now=T0 + timedelta(hours=1)) is None
    assert await reviewer_sessions.signed_in_key(pool, phone, now=T0 + timedelta(hours=1))
    # Ending again, or ending one that had expired, changes nothing.
    await reviewer_sessions.end(pool, laptop, now=T0 + timedelta(hours=2))
    await reviewer_sessions.end(pool, phone, now=T0 + LIFETIME + SECOND)
    ended = await pool.fetch("SELECT ended_at FROM reviewer_sessions ORDER BY ended_at")
    assert [row["ended_at"] for row in ended] == [T0 + timedelta(hours=1), None]


@pytest.mark.parametrize(
    "end_the_key",
    [
        "UPDATE api_keys SET revoked_at = now() WHERE id = $1",
        "DELETE FROM api_keys WHERE id = $1",
    ],
)
async def test_a_revoked_or_deleted_key_ends_its_sessions(
    pool: asyncpg.Pool, keys: dict[Role, str], end_the_key: str
) -> None:
    reviewer, admin = await key_id(pool, "qa_reviewer"), await key_id(pool, "admin")
    tokens = [await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME) for _ in range(2)]
    other = await reviewer_sessions.start(pool, admin, lifetime=LIFETIME)
    await pool.execute(end_the_key, reviewer)
    for token in tokens:
        assert await reviewer_sessions.signed_in_key(pool, token) is None
    assert await reviewer_sessions.signed_in_key(pool, other)


async def test_retention_deletes_the_sessions_that_stopped_a_week_ago(
    pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    reviewer = await key_id(pool, "qa_reviewer")
    now = T0 + KEEP_STOPPED_FOR + timedelta(days=1)
    cutoff = now - KEEP_STOPPED_FOR

    async def session(started: datetime, ended: datetime | None = None) -> str:
        token = await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME, now=started)
        if ended is not None:
            await reviewer_sessions.end(pool, token, now=ended)
        return token

    # Stopped before the cutoff: expired, or signed out (long before it would have expired).
    await session(cutoff - LIFETIME - SECOND)
    await session(cutoff - timedelta(days=1), ended=cutoff - SECOND)
    # Stopped after the cutoff, or live.
    kept = [
        await session(cutoff - LIFETIME + SECOND),
        await session(cutoff - timedelta(hours=1), ended=cutoff + SECOND),
        await session(now - timedelta(hours=1)),
    ]

    assert await SessionRetention(pool).run_once(now) == 2
    assert await SessionRetention(pool).run_once(now) == 0
    remaining = await pool.fetch("SELECT token_hash FROM reviewer_sessions")
    assert {row["token_hash"] for row in remaining} == {
        reviewer_sessions.token_hash(token) for token in kept
    }


async def test_a_worker_deletes_stopped_sessions_on_its_retention_interval(
    pool: asyncpg.Pool,
    database_url: str,
    settings: Settings,
    keys: dict[Role, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "RETENTION_EVERY", timedelta(milliseconds=50))
    reviewer = await key_id(pool, "qa_reviewer")
    long_ago = datetime.now(UTC) - KEEP_STOPPED_FOR - LIFETIME - timedelta(minutes=1)
    await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME, now=long_ago)
    live = await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME)
    worker = WorkerRuntime(pool, database_url, settings, Gated(), capabilities=EVERY_DOMAIN)
    await worker.start()
    try:

        async def only_the_live_one_left() -> bool:
            left = await pool.fetch("SELECT token_hash FROM reviewer_sessions")
            return [row["token_hash"] for row in left] == [reviewer_sessions.token_hash(live)]

        await eventually(only_the_live_one_left, 10, "the stopped session deleted")
    finally:
        await worker.stop()


async def test_the_lookup_reads_sessions_and_keys_by_primary_key(
    pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    reviewer = await key_id(pool, "qa_reviewer")
    await pool.execute(
        """INSERT INTO api_keys (name, role, key_hash)
           SELECT 'key-' || n, 'qa_reviewer', sha256(('key-' || n)::bytea)
           FROM generate_series(1, 2000) n;
           INSERT INTO reviewer_sessions (token_hash, api_key_id, created_at, expires_at, ended_at)
           SELECT sha256(n::text::bytea), k.id, at, at + interval '12 hours',
                  CASE WHEN n % 2 = 0 THEN at + interval '1 hour' END
           FROM generate_series(1, 20000) n
           JOIN api_keys k ON k.name = 'key-' || (n % 2000 + 1),
           LATERAL (SELECT '2025-03-01 08:00Z'::timestamptz - n * interval '1 minute' AS at) s;
           ANALYZE api_keys;
           ANALYZE reviewer_sessions"""
    )
    token = await reviewer_sessions.start(pool, reviewer, lifetime=LIFETIME, now=T0)

    async def reads(query: str, *arguments: object) -> set[str]:
        """The indexes the plan goes through, and the tables it reads whole."""
        shown = await pool.fetchval(f"EXPLAIN (FORMAT JSON) {query}", *arguments)
        plan = json.loads(shown)[0]["Plan"]
        return {
            node["Index Name"] if "Index Name" in node else f"{node['Relation Name']}: all"
            for node in nodes(plan)
            if "Index Name" in node or node["Node Type"] == "Seq Scan"
        }

    lookup = reviewer_sessions.queries["reviewer_session_key_if_live"]
    assert await reads(lookup, reviewer_sessions.token_hash(token), T0) == {
        "reviewer_sessions_pkey",
        "api_keys_pkey",
    }
    # Retention runs every few minutes: what it finds stopped a little before the cutoff.
    retention = reviewer_sessions.queries["reviewer_sessions_delete_stopped_before"]
    assert await reads(retention, T0 - timedelta(days=13)) == {"reviewer_sessions_stopped"}
