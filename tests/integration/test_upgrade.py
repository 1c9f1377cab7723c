"""A database of the release before a migration, with data in it, brought up to date: what the
migration derives from the rows is right, and serving goes on from them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from core import domains
from pool import serving
from server import migrate
from server.database import create_pool
from tests.support import postgres
from tests.support.server import ROOT

# The last migration of the release before the mission row kept its ready serves.
BEFORE_READY_SERVES = 30


@pytest.fixture
async def migrated_to_0030(postgres_server: str) -> AsyncIterator[asyncpg.Pool]:
    name, url = await postgres.create_database(postgres_server, "template0")
    db = await create_pool(url)
    try:
        async with db.acquire() as connection:
            await connection.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for migration in migrate.available()[:BEFORE_READY_SERVES]:
                await connection.execute(migration.sql)
                await connection.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )
        yield db
    finally:
        await db.close()
        await postgres.drop_database(postgres_server, name)


async def test_the_ready_serves_of_existing_missions_are_counted_from_their_variants(
    migrated_to_0030: asyncpg.Pool,
) -> None:
    db = migrated_to_0030
    mission = await db.fetchval(
        """INSERT INTO missions (domain, kind, language, title, brief, gold_files, test_files,
               sabotaged_files, bug_summary, proof, provider, qa_status, serve_count, max_serves,
               content_hash)
           VALUES ('python-backend', 'technical', 'python', 't', 'b', '{}',
                   '{"test_a.py": "def test(): pass"}', '{}', 's', '{}', 'test', 'approved', 6,
                   100, 'h')
           RETURNING id"""
    )
    # Bugs of five serves each: one served out and retired, one retired by a reviewer with
    # serves left, one served twice of its three ready, one rendered beyond its share.
    for served, rendered, retired in ((5, 5, True), (0, 4, True), (2, 3, False), (0, 9, False)):
        variant = await db.fetchval(
            """INSERT INTO mission_variants (mission_id, sabotaged_files, bug_summary, proof,
                   provider, serve_count, max_serves, rendered_serves, retired_at,
                   retire_reason, content_hash)
               VALUES ($1, jsonb_build_object('a.py', $2::text), 's', '{}', 'test', $3, 5, $4,
                       CASE WHEN $5 THEN now() END, CASE WHEN $5 THEN 'done' END,
                       sha256($2::text::bytea))
               RETURNING id""",
            mission,
            f"bug {rendered}",
            served,
            rendered,
            retired,
        )
        await db.execute(
            """INSERT INTO mission_renderings (variant_id, mission_id, files, gold_files,
                   test_files, hidden_test_files, renderer, proof, status, serve_count,
                   max_serves)
               VALUES ($1, $2, '{"a.py": "x"}', '{}', '{}', '{}', 'identity', '{}', 'ready', $3,
                       $4)""",
            variant,
            mission,
            served,
            rendered,
        )
    async with db.acquire() as connection:
        applied = await migrate.apply(connection)
    assert applied[0].version == BEFORE_READY_SERVES + 1
    # The third bug's one serve left, and the fourth's share of five.
    assert await db.fetchval("SELECT ready_serves FROM missions WHERE id = $1", mission) == 6
    track = domains.load(ROOT / "domain_map.yaml").domains_for("backend-engineer")
    async with db.acquire() as connection, connection.transaction():
        instance = await serving.serve(
            connection, user_id="after-the-upgrade", track="backend-engineer", domains=track
        )
    assert instance is not None
    assert await db.fetchval("SELECT ready_serves FROM missions WHERE id = $1", mission) == 5
