"""Named SQL queries, loaded once from the `queries.sql` beside the package that owns the table.

A file holds blocks that start with `-- name: <query_name>` followed by one-line comments
(the purpose) and the statement. Asking for a name the file lacks fails at once, and a
test checks every name the code uses.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TypeVar

import asyncpg

log = logging.getLogger(__name__)
T = TypeVar("T")

_NAME = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


class Queries:
    """The named statements of one `queries.sql`, read once at import of its package."""

    def __init__(self, package: str, filename: str = "queries.sql") -> None:
        self.source = f"{package}/{filename}"
        text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        self._statements = parse(text, self.source)

    def __getitem__(self, name: str) -> str:
        try:
            return self._statements[name]
        except KeyError:
            raise KeyError(f"{self.source} has no query named {name!r}") from None

    def names(self) -> frozenset[str]:
        return frozenset(self._statements)


def parse(text: str, source: str) -> dict[str, str]:
    statements: dict[str, str] = {}
    matches = list(_NAME.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = text[match.end() : end].strip()
        name = match["name"]
        if name in statements:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        if not _without_comments(body):
            raise ValueError(f"{source}: query {name!r} has no statement")
        statements[name] = body
    return statements


def _without_comments(body: str) -> str:
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("--"))


# A session that the server terminates in the middle of a statement (a restart, a failover,
# pg_terminate_backend) sometimes surfaces as asyncpg's protocol-state error rather than as a
# closed connection; asyncpg's pool then discards that connection on release.
BROKEN_SESSION_ERRORS = (asyncpg.InterfaceError, asyncpg.InternalClientError)

# What a database outage or a lost connection raises: handled as "try again later".
DATABASE_ERRORS = (asyncpg.PostgresError, *BROKEN_SESSION_ERRORS, OSError)

# What a database that is away (stopped, restarting, failing over, full) raises, as opposed to
# a statement's own fault: the same request may well succeed once it is back.
OUTAGE_ERRORS = (
    OSError,  # refused, reset, unreachable, and TimeoutError
    *BROKEN_SESSION_ERRORS,  # the connection closed under the query
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,  # shutting down, crashed, starting up
    asyncpg.InsufficientResourcesError,  # too many connections
    asyncpg.ReadOnlySQLTransactionError,  # a failover's old primary
)

# A connection, whether made directly or lent by a pool.
Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
# Where a query can run: the pool, for one statement, or a connection (in a transaction).
Executor = asyncpg.Pool | Connection


async def outlasting_outages(
    write: Callable[[], Awaitable[T]], *, what: str, patience_seconds: float = 120.0
) -> T:
    """Run a write that must not be lost (spend on the ledger, a job's end), and again after a
    database outage, for up to `patience_seconds`; then the outage's error is raised."""
    delay = 0.1
    deadline = time.monotonic() + patience_seconds
    while True:
        try:
            return await write()
        except OUTAGE_ERRORS as error:
            # Our own pool closing (the process is stopping) is no outage to wait out.
            if time.monotonic() + delay > deadline or "pool is clos" in str(error):
                raise
            log.warning("%s failed, trying again in %.1f s: %s", what, delay, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
