from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from server.database import create_pool
from tests.support import postgres


@pytest.fixture(scope="session")
async def postgres_server() -> str:
    return await postgres.server_url()


@pytest.fixture(scope="session")
async def template(postgres_server: str) -> str:
    return await postgres.ensure_template(postgres_server)


@pytest.fixture
async def database_url(postgres_server: str, template: str) -> AsyncIterator[str]:
    name, url = await postgres.create_database(postgres_server, template)
    yield url
    await postgres.drop_database(postgres_server, name)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, max_size=30)
    yield pool
    await pool.close()
