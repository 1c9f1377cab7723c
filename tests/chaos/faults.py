"""The database faults a chaos run brings about from inside PostgreSQL: every session of
warmpool's processes terminated at once (as an administrator, a pooler or a failover does), and
the database's default isolation changed under them. The run's own connections, which watch
and judge, name themselves OBSERVER and are spared."""

from __future__ import annotations

import asyncpg

from core.sql import Executor

OBSERVER = "warmpool chaos observer"
OBSERVER_SETTINGS = {"application_name": OBSERVER}

# Client backends only: the server's own processes (autovacuum, the checkpointer) are no
# client's session. This very session is an observer's, and so spared too.
TERMINATE_SESSIONS_BUT_OBSERVERS = """
SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND application_name <> $1::text AND pid <> pg_backend_pid()
"""

ISOLATION_DEFAULT = "repeatable read"


async def connect_observer(url: str, *, within_seconds: float = 60) -> asyncpg.Connection:
    """A connection of the run's own. Without TLS, which the private server does not offer: a
    connect that times out while asking for it leaves a future nobody retrieves."""
    return await asyncpg.connect(
        url, timeout=within_seconds, ssl=False, server_settings=OBSERVER_SETTINGS
    )


async def terminate_sessions(database: Executor) -> int:
    """How many of the database's sessions were terminated: all but the observers'."""
    terminated: int = await database.fetchval(TERMINATE_SESSIONS_BUT_OBSERVERS, OBSERVER)
    return terminated


async def default_to_repeatable_read(database: Executor) -> None:
    """Sessions made from now on begin every transaction in REPEATABLE READ unless they say
    otherwise (warmpool's say READ COMMITTED); sessions already open keep what they had."""
    name = await database.fetchval("SELECT current_database()")
    # ALTER DATABASE takes no parameters; the name is quoted as an identifier.
    quoted = await database.fetchval("SELECT quote_ident($1::text)", name)
    await database.execute(
        f"ALTER DATABASE {quoted} SET default_transaction_isolation = '{ISOLATION_DEFAULT}'"
    )
