"""Disposable databases for SQL proofs, on a Postgres reached through an admin URL.

A template per pgTAP version is built once, by whichever process gets there first: pgTAP in
its own schema `tap`, sealed against connections so that clones never find it in use. Each
run gets a role of its own (no superuser, no CREATEDB or CREATEROLE, a statement timeout,
bounded spill files) and a database cloned from the template and owned by that role. Both
are dropped afterwards, the database WITH (FORCE), whatever happened; names carry their
creation time, so what a crashed process left behind is dropped at the next start.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import asyncpg

from core.sql import Executor, Queries

queries = Queries("qa", "proof_queries.sql")
# Run inside the proof databases, where pgTAP lives.
statements = Queries("qa", "proof_database.sql")

RUN_PREFIX = "warmpool_proof_run_"
_RUN_NAME = re.compile(rf"^{RUN_PREFIX}[0-9]+_[0-9a-f]{{8}}$")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*$")
STALE_AFTER_S = 3600
TEMP_FILE_LIMIT = "64MB"


class DatabasesUnavailable(Exception):
    """SQL proofs cannot run against this Postgres; the message says why and what to do."""


class ProofDatabases:
    def __init__(
        self, admin: asyncpg.Pool, url: str, template: str, superuser: bool, timeout_s: float
    ) -> None:
        self._admin = admin
        self._url = url
        self._template = template
        self._superuser = superuser
        self._statement_timeout = f"{int(timeout_s * 1000)}ms"

    @classmethod
    async def open(
        cls, admin_url: str, *, statement_timeout_s: float, connections: int
    ) -> ProofDatabases:
        where = _where(admin_url)
        try:
            admin = await asyncpg.create_pool(
                admin_url, min_size=1, max_size=connections, timeout=10
            )
        except (OSError, asyncpg.PostgresError, TimeoutError) as error:
            raise DatabasesUnavailable(
                f"sql proofs cannot reach PostgreSQL at {where}: {error}"
            ) from None
        try:
            version = await admin.fetchval(queries["proof_pgtap_version"])
            if version is None or not _VERSION.match(version):
                raise DatabasesUnavailable(
                    f"sql proofs need pgTAP in the PostgreSQL at {where} "
                    "(Debian package postgresql-<major>-pgtap)"
                )
            powers = await admin.fetchrow(queries["proof_admin_powers"])
            if powers is None or not powers["can_create"]:
                raise DatabasesUnavailable(
                    f"sql proofs need an admin role that may create roles and databases at {where}"
                )
            template = await _ensure_template(admin, admin_url, version)
            await _drop_stale(admin)
        except BaseException:
            await admin.close()
            raise
        return cls(admin, admin_url, template, powers["superuser"], statement_timeout_s)

    @property
    def statement_timeout(self) -> str:
        return self._statement_timeout

    @asynccontextmanager
    async def disposable(self) -> AsyncIterator[tuple[str, asyncpg.Connection]]:
        """A fresh database and a connection to it as the run's own role: (role, connection)."""
        name = f"{RUN_PREFIX}{int(time.time())}_{secrets.token_hex(4)}"
        assert _RUN_NAME.match(name)
        password = secrets.token_hex(16)
        connection: asyncpg.Connection | None = None
        try:
            await self._create(name, password)
            connection = await asyncpg.connect(
                self._url,
                user=name,
                password=password,
                database=name,
                statement_cache_size=0,
                timeout=10,
                server_settings={"application_name": "warmpool proof"},
            )
            yield name, connection
        finally:
            if connection is not None:
                connection.terminate()
            # Shielded: a run cancelled twice still leaves no database or role behind.
            await asyncio.shield(self._drop(name))

    async def close(self) -> None:
        await self._admin.close()

    async def _create(self, name: str, password: str) -> None:
        await _format_and_run(
            self._admin,
            queries["proof_role_create_statement"],
            name,
            password,
            self._statement_timeout,
        )
        if self._superuser:
            await _format_and_run(
                self._admin, queries["proof_role_limit_temp_files_statement"], name, TEMP_FILE_LIMIT
            )
        await _format_and_run(
            self._admin, queries["proof_run_database_create_statement"], name, self._template
        )

    async def _drop(self, name: str) -> None:
        await _format_and_run(self._admin, queries["proof_database_drop_statement"], name)
        await _format_and_run(self._admin, queries["proof_run_role_drop_statement"], name)


async def _format_and_run(executor: Executor, query: str, *values: str) -> None:
    statement = await executor.fetchval(query, *values)
    await executor.execute(statement)


async def _ensure_template(admin: asyncpg.Pool, admin_url: str, version: str) -> str:
    name = f"warmpool_proof_template_pgtap_{version.replace('.', '_')}"
    async with admin.acquire() as connection:
        await connection.execute(queries["proof_template_lock"])
        try:
            if not await connection.fetchval(queries["proof_database_exists"], name):
                building = f"{name}_building"
                await _format_and_run(
                    connection, queries["proof_database_drop_statement"], building
                )
                await _format_and_run(
                    connection, queries["proof_database_create_statement"], building
                )
                template = await asyncpg.connect(admin_url, database=building)
                try:
                    await template.execute(statements["proof_template_install_pgtap"])
                finally:
                    await template.close()
                await _format_and_run(
                    connection, queries["proof_template_seal_statement"], building, name
                )
        finally:
            await connection.execute(queries["proof_template_unlock"])
    return name


async def _drop_stale(admin: asyncpg.Pool) -> None:
    cutoff = int(time.time()) - STALE_AFTER_S
    for row in await admin.fetch(queries["proof_stale_databases"], cutoff):
        await _format_and_run(admin, queries["proof_database_drop_statement"], row["name"])
    for row in await admin.fetch(queries["proof_stale_roles"], cutoff):
        await _format_and_run(admin, queries["proof_run_role_drop_statement"], row["name"])


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
