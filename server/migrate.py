"""Ordered SQL migrations, applied exactly once even when several processes start together.

Each `migrations/NNNN_name.sql` runs in its own transaction, recorded in
`schema_migrations`. A session advisory lock makes concurrent starters queue: the first
applies what is missing, the others then find nothing left to do.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources

from core.sql import Connection

log = logging.getLogger(__name__)

# Any constant works; it only has to be the same in every warmpool process.
MIGRATION_LOCK = 0x77_61_72_6D  # "warm"

_FILENAME = re.compile(r"^(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    found = []
    for entry in resources.files("server.migrations").iterdir():
        match = _FILENAME.match(entry.name)
        if match:
            found.append(
                Migration(int(match["version"]), match["name"], entry.read_text(encoding="utf-8"))
            )
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 0001, 0002, ... without gaps: {versions}")
    return found


LATEST_VERSION = len(available())


async def apply(connection: Connection) -> list[Migration]:
    """Bring the schema up to date; return the migrations this call applied."""
    await connection.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await connection.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version     integer PRIMARY KEY,
                   name        text NOT NULL,
                   applied_at  timestamptz NOT NULL DEFAULT now()
               )"""
        )
        done = {
            row["version"]
            for row in await connection.fetch("SELECT version FROM schema_migrations")
        }
        applied = []
        for migration in available():
            if migration.version in done:
                continue
            async with connection.transaction():
                await connection.execute(migration.sql)
                await connection.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                    migration.version,
                    migration.name,
                )
            log.info("applied migration %04d_%s", migration.version, migration.name)
            applied.append(migration)
        return applied
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)


async def current_version(connection: Connection) -> int:
    if not await connection.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        return 0
    return int(await connection.fetchval("SELECT coalesce(max(version), 0) FROM schema_migrations"))
