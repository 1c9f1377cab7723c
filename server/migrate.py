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

from core.sql import Connection, Queries

queries = Queries("server")

log = logging.getLogger(__name__)

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
    await connection.execute(queries["schema_migrations_lock"])
    try:
        await connection.execute(queries["schema_migrations_create"])
        done = {
            row["version"]: row["name"]
            for row in await connection.fetch(queries["schema_migrations_applied"])
        }
        migrations = available()
        _check_history(done, migrations)
        applied = []
        for migration in migrations:
            if migration.version in done:
                continue
            async with connection.transaction():
                await connection.execute(migration.sql)
                await connection.execute(
                    queries["schema_migration_record"], migration.version, migration.name
                )
            log.info("applied migration %04d_%s", migration.version, migration.name)
            applied.append(migration)
        return applied
    finally:
        await connection.execute(queries["schema_migrations_unlock"])


class SchemaMismatch(Exception):
    """The database holds migrations that are not this release's: applying the rest would
    build on a schema this release does not know."""


def _check_history(done: dict[int, str], migrations: list[Migration]) -> None:
    ours = {migration.version: migration.name for migration in migrations}
    for version, name in sorted(done.items()):
        if version not in ours:
            raise SchemaMismatch(
                f"the database has migration {version:04d}_{name}, which this release lacks: "
                "a newer release migrated it; run that release (or a newer one)"
            )
        if ours[version] != name:
            raise SchemaMismatch(
                f"the database's migration {version:04d} is {name!r}, this release's is "
                f"{ours[version]!r}: another release migrated it; run that release, or restore "
                "a backup made before it"
            )


async def current_version(connection: Connection) -> int:
    if not await connection.fetchval(queries["schema_migrations_exist"]):
        return 0
    return int(await connection.fetchval(queries["schema_version"]))
