"""The caps and idempotency keys hold whatever isolation the database defaults to (a managed
Postgres set to REPEATABLE READ, say): every connection warmpool opens runs in READ
COMMITTED, the claim refuses any other, and a collision that still happens answers 503."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from litestar import Litestar, get
from litestar.testing import AsyncTestClient

from generation import admission
from server.auth import Role
from server.database import create_pool
from server.errors import PROBLEM_JSON, exception_handlers
from tests.support.http import bearer
from tests.support.jobs import enqueue
from tests.support.server import running_server

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

CLAIMERS = 8


@pytest.fixture
async def repeatable_read(database_url: str) -> str:
    """The test database, defaulting every new session to REPEATABLE READ."""
    connection = await asyncpg.connect(database_url)
    try:
        name = await connection.fetchval("SELECT current_database()")
        await connection.execute(
            f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'"
        )
    finally:
        await connection.close()
    return database_url


@pytest.fixture
async def warmpool_pool(repeatable_read: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(repeatable_read, max_size=CLAIMERS + 2)
    yield pool
    await pool.close()


async def test_a_raw_session_defaults_to_repeatable_read_and_warmpools_do_not(
    repeatable_read: str, warmpool_pool: asyncpg.Pool
) -> None:
    raw = await asyncpg.connect(repeatable_read)
    try:
        assert await raw.fetchval("SHOW transaction_isolation") == "repeatable read"
    finally:
        await raw.close()
    assert await warmpool_pool.fetchval("SHOW transaction_isolation") == "read committed"


async def test_the_global_cap_holds_when_claims_race(warmpool_pool: asyncpg.Pool) -> None:
    for index in range(3 * CLAIMERS):
        await enqueue(warmpool_pool, f"user-{index}")
    claim = "SELECT id FROM generation_claim_within_cap($1, 2, 2, $2, NULL, NULL, 0, 0)"  # cap 2
    await asyncio.gather(
        *(warmpool_pool.fetch(claim, 3, f"w:{index}") for index in range(CLAIMERS))
    )
    generating = await warmpool_pool.fetchval(
        "SELECT count(*) FROM generation_jobs WHERE status = 'generating'"
    )
    assert generating == 2


async def test_the_claim_refuses_to_run_in_any_other_isolation(repeatable_read: str) -> None:
    raw = await asyncpg.connect(repeatable_read)
    try:
        with pytest.raises(asyncpg.InvalidTransactionStateError, match="READ COMMITTED"):
            await raw.fetch(
                "SELECT * FROM generation_claim_within_cap(1, 2, 2, 'w', NULL, NULL, 0, 0)"
            )
    finally:
        await raw.close()


async def test_the_user_cap_holds_when_enqueues_race(warmpool_pool: asyncpg.Pool) -> None:
    async def enqueue_one() -> str:
        async with warmpool_pool.acquire() as connection, connection.transaction():
            try:
                await admission.enqueue(
                    connection,
                    lane="interactive",
                    user_id="alice",
                    track="backend-engineer",
                    domain="python-backend",
                    limits=admission.AdmissionLimits(
                        user_cap=3, max_pending=200, replenish_max_pending=100
                    ),
                )
            except admission.UserCapReached:
                return "refused"
            return "accepted"

    outcomes = Counter(await asyncio.gather(*(enqueue_one() for _ in range(20))))
    assert outcomes == {"accepted": 3, "refused": 17}


async def test_one_key_at_once_from_many_connections_creates_one_job_and_no_error(
    repeatable_read: str, keys: dict[Role, str], tmp_path: Path
) -> None:
    headers = {**bearer(keys["candidate_app"]), "Idempotency-Key": "k-1"}
    body = {"user_id": "bob", "track": "backend-engineer"}
    with running_server(repeatable_read, tmp_path) as url:
        limits = httpx.Limits(max_connections=CLAIMERS)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
            answers = await asyncio.gather(
                *(client.post("/v1/jobs", json=body, headers=headers) for _ in range(CLAIMERS))
            )
    assert {answer.status_code for answer in answers} <= {200, 202}, [a.text for a in answers]
    assert len({answer.json()["job"]["id"] for answer in answers}) == 1


@pytest.mark.parametrize(
    "collision",
    [asyncpg.SerializationError, asyncpg.DeadlockDetectedError],
    ids=["serialization failure", "deadlock"],
)
async def test_a_collision_that_still_happens_answers_503_with_retry_after(
    collision: type[asyncpg.PostgresError],
) -> None:
    @get("/collides", sync_to_thread=False)
    def collides() -> None:
        raise collision("could not serialize access due to concurrent update")

    app = Litestar([collides], exception_handlers=exception_handlers())
    async with AsyncTestClient(app) as client:
        answer = await client.get("/collides")
    assert answer.status_code == 503
    assert answer.headers["content-type"].startswith(PROBLEM_JSON)
    assert answer.headers["retry-after"].isdigit()
    assert "retry" in answer.json()["detail"]
