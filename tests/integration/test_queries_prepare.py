"""Every named query is valid SQL against the real, migrated schema."""

import asyncpg

from core.sql import Queries

PACKAGES = ("core", "server", "generation", "pool")


async def test_every_named_query_prepares(pool: asyncpg.Pool) -> None:
    failures = {}
    prepared = 0
    async with pool.acquire() as connection:
        for package in PACKAGES:
            queries = Queries(package)
            for name in sorted(queries.names()):
                try:
                    await connection.prepare(queries[name])
                    prepared += 1
                except asyncpg.PostgresError as error:
                    failures[f"{package}.{name}"] = str(error)
    assert failures == {}
    assert prepared == sum(len(Queries(package).names()) for package in PACKAGES)
