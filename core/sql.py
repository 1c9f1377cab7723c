"""Named SQL queries, loaded once from the `queries.sql` beside the package that owns the table.

A file holds blocks that start with `-- name: <query_name>` followed by one-line comments
(the purpose) and the statement. Asking for a name the file lacks fails at once, and a
test checks every name the code uses.
"""

from __future__ import annotations

import re
from importlib import resources

import asyncpg

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


# What a database outage or a lost connection raises: handled as "try again later".
DATABASE_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)

# A connection, whether made directly or lent by a pool.
Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
# Where a query can run: the pool, for one statement, or a connection (in a transaction).
Executor = asyncpg.Pool | Connection
