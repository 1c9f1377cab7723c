"""Every named query is valid SQL against the real, migrated schema."""

from pathlib import Path

import asyncpg

from core.sql import Queries

PACKAGES = ("core", "server", "generation", "pool", "qa")
ROOT = Path(__file__).resolve().parents[2]


def query_files() -> list[Queries]:
    # A package may split its queries: queries.sql, and <topic>_queries.sql beside it.
    return [
        Queries(package, source.name)
        for package in PACKAGES
        for source in sorted((ROOT / package).glob("*queries.sql"))
    ]


async def test_every_named_query_prepares(pool: asyncpg.Pool) -> None:
    failures = {}
    prepared = 0
    async with pool.acquire() as connection:
        for queries in query_files():
            for name in sorted(queries.names()):
                try:
                    await connection.prepare(queries[name])
                    prepared += 1
                except asyncpg.PostgresError as error:
                    failures[f"{queries.source}: {name}"] = str(error)
    assert failures == {}
    assert prepared == sum(len(queries.names()) for queries in query_files())
