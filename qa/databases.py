"""Disposable databases for SQL proofs, on a Postgres reached through an admin URL.

A template per pgTAP version is built once, by whichever process gets there first: from
template0, so nothing added to template1 reaches a proof, with pgTAP in its own schema `tap`
and a guard against SQL that would change what pgTAP reports (see proof_database.sql), sealed
against connections so that clones never find it in use. Each run gets a role of its
own (no superuser, no CREATEDB or CREATEROLE, one connection, the limits of qa/sql_bounds.py)
and a database cloned from the template and owned by that role, watched while the proof runs.
Both are dropped afterwards, the database WITH (FORCE), whatever happened; names carry their
creation time, so what a crashed process left behind is dropped at the next start.

Every role may connect to a database by default, so the admin URL's database (warmpool's own,
where proofs share its server) and each run database are closed to all but their owner and the
admin role: a run's role reaches its own database only.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg

from core.sql import Executor, Queries
from qa.sql_bounds import SESSION_LIMITS, TEMP_FILE_LIMIT, Watchdog, backend_memory

queries = Queries("qa", "proof_queries.sql")
# Run inside the proof databases, where pgTAP lives.
statements = Queries("qa", "proof_database.sql")

RUN_PREFIX = "warmpool_proof_run_"
_RUN_NAME = re.compile(rf"^{RUN_PREFIX}[0-9]+_[0-9a-f]{{8}}$")
_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*$")
STALE_AFTER_S = 3600
# Part of the template's name: a template built another way is never reused.
TEMPLATE_RECIPE = 3


class DatabasesUnavailable(Exception):
    """SQL proofs cannot run against this Postgres; the message says why and what to do."""


@dataclass(frozen=True)
class Run:
    """One proof's database, named like its role, and a connection to it as that role."""

    role: str
    connection: asyncpg.Connection
    watchdog: Watchdog


@dataclass(frozen=True)
class _Abilities:
    limits_temp_files: bool
    watches_memory: bool


# How long a run cancelled twice waits for its database to go; past it, close() still waits.
DROP_WAIT_S = 10.0


class ProofDatabases:
    def __init__(
        self,
        admin: asyncpg.Pool,
        url: str,
        template: str,
        abilities: _Abilities,
        timeout_s: float,
    ) -> None:
        self._admin = admin
        self._url = url
        self._template = template
        self._abilities = abilities
        self._statement_timeout = f"{int(timeout_s * 1000)}ms"
        self._where = _where(url)
        self._drops: set[asyncio.Task[None]] = set()

    @classmethod
    async def open(
        cls,
        admin_url: str,
        *,
        statement_timeout_s: float,
        connections: int,
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
                    "(Debian package postgresql-<major>-pgtap; for the embedded PostgreSQL, "
                    "run warmpool toolchain)"
                )
            powers = await admin.fetchrow(queries["proof_admin_powers"])
            if powers is None or not powers["can_create"]:
                raise DatabasesUnavailable(
                    f"sql proofs need an admin role that may create roles and databases at {where}"
                )
            async with admin.acquire() as connection:
                await connection.execute(queries["proof_setup_lock"])
                try:
                    await _close_to_others(connection, where)
                    template = await _ensure_template(connection, admin_url, version)
                finally:
                    await connection.execute(queries["proof_setup_unlock"])
            await _drop_stale(admin)
            abilities = _Abilities(powers["limits_temp_files"], await _watches_memory(admin))
        except BaseException:
            await admin.close()
            raise
        return cls(admin, admin_url, template, abilities, statement_timeout_s)

    @property
    def statement_timeout(self) -> str:
        return self._statement_timeout

    def session_limits(self) -> dict[str, str]:
        """The user settings a run's role is held to, with their values."""
        return {**SESSION_LIMITS, "statement_timeout": self._statement_timeout}

    def unbounded(self) -> str | None:
        """Why a run here could take more than its bounds, so that untrusted SQL must not run;
        None when every bound holds."""
        if self._abilities.limits_temp_files and self._abilities.watches_memory:
            return None
        return (
            f"untrusted sql proofs need an admin role at {self._where} that may set a role's "
            "temp_file_limit and read the server's /proc to watch a run's memory (a superuser "
            "on a Linux server); refusing to run them unbounded"
        )

    @asynccontextmanager
    async def disposable(self) -> AsyncIterator[Run]:
        """A fresh database, a connection to it as the run's own role, and its watchdog."""
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
            watchdog = Watchdog(
                self._admin,
                database=name,
                pid=connection.get_server_pid(),
                watch_memory=self._abilities.watches_memory,
            )
            yield Run(name, connection, watchdog)
        finally:
            if connection is not None:
                connection.terminate()
            # Shielded: a run cancelled twice still leaves no database or role behind.
            drop = asyncio.ensure_future(self._drop(name))
            self._drops.add(drop)
            drop.add_done_callback(self._drops.discard)
            try:
                await asyncio.shield(drop)
            except asyncio.CancelledError:
                # Cancelled again while dropping (the time limit on top of a cancel): the run
                # still ends after its database, unless dropping hangs.
                await asyncio.wait({drop}, timeout=DROP_WAIT_S)
                raise

    async def close(self) -> None:
        # The drops of runs cancelled by a stop go on, shielded: they need the pool.
        await asyncio.gather(*self._drops, return_exceptions=True)
        await self._admin.close()

    async def _create(self, name: str, password: str) -> None:
        await _format_and_run(self._admin, queries["proof_role_create_statement"], name, password)
        limits = self.session_limits()
        if self._abilities.limits_temp_files:
            limits["temp_file_limit"] = TEMP_FILE_LIMIT
        statement = await self._admin.fetchval(
            queries["proof_role_settings_statement"], name, list(limits), list(limits.values())
        )
        await self._admin.execute(statement)
        await _format_and_run(
            self._admin, queries["proof_run_database_create_statement"], name, self._template
        )
        await _format_and_run(self._admin, queries["proof_database_close_statement"], name)

    async def _drop(self, name: str) -> None:
        await _format_and_run(self._admin, queries["proof_database_drop_statement"], name)
        await _format_and_run(self._admin, queries["proof_run_role_drop_statement"], name)


async def _format_and_run(executor: Executor, query: str, *values: str) -> None:
    statement = await executor.fetchval(query, *values)
    await executor.execute(statement)


async def _close_to_others(connection: Executor, where: str) -> None:
    """The admin URL's database closed to every role but its owner and the admin's: where
    proofs share warmpool's server, that is warmpool's database. Under the setup lock, since
    concurrent GRANTs on one database fail ("tuple concurrently updated")."""
    database = await connection.fetchval(queries["proof_admin_database"])
    if not await connection.fetchval(queries["proof_database_open_to_all"], database):
        return
    await _format_and_run(connection, queries["proof_database_close_statement"], database)
    # A role that neither owns the database nor may grant on it is only warned.
    if await connection.fetchval(queries["proof_database_open_to_all"], database):
        raise DatabasesUnavailable(
            f"sql proofs need the database {database} at {where} closed to other roles (a run's "
            "role could connect to it), which this admin role may not do: as its owner, REVOKE "
            f"CONNECT ON DATABASE {database} FROM PUBLIC (granting CONNECT to the roles that use "
            "it), or give SQL proofs a server of their own (WARMPOOL_PROOF_DATABASE_URL)"
        )


async def _ensure_template(connection: Executor, admin_url: str, version: str) -> str:
    """The pgTAP template's name, built first if this server lacks it (under the setup lock,
    so concurrent starts build it once)."""
    name = f"warmpool_proof_template_{TEMPLATE_RECIPE}_pgtap_{version.replace('.', '_')}"
    if await connection.fetchval(queries["proof_database_exists"], name):
        return name
    building = f"{name}_building"
    await _format_and_run(connection, queries["proof_database_drop_statement"], building)
    await _format_and_run(connection, queries["proof_database_create_statement"], building)
    template = await asyncpg.connect(admin_url, database=building)
    try:
        await template.execute(statements["proof_template_install_pgtap"])
    finally:
        await template.close()
    await _format_and_run(connection, queries["proof_template_seal_statement"], building, name)
    return name


async def _watches_memory(admin: asyncpg.Pool) -> bool:
    """Whether the admin may read a backend's memory from the server's /proc (its own, here)."""
    async with admin.acquire() as connection:
        try:
            return await backend_memory(connection, connection.get_server_pid()) is not None
        except asyncpg.InsufficientPrivilegeError:
            return False


async def _drop_stale(admin: asyncpg.Pool) -> None:
    cutoff = int(time.time()) - STALE_AFTER_S
    for row in await admin.fetch(queries["proof_stale_databases"], cutoff):
        await _format_and_run(admin, queries["proof_database_drop_statement"], row["name"])
    for row in await admin.fetch(queries["proof_stale_roles"], cutoff):
        await _format_and_run(admin, queries["proof_run_role_drop_statement"], row["name"])


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
