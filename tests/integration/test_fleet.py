"""What the live workers can make, over HTTP: GET /v1/workers."""

from datetime import timedelta

import asyncpg
from litestar import Litestar
from litestar.testing import AsyncTestClient

from generation.registry import Capabilities, Registration
from generation.worker import Worker
from server.auth import Role
from tests.support.generators import Recording
from tests.support.http import assert_problem, bearer

Client = AsyncTestClient[Litestar]
NO_PGTAP = {"sql-data": "pgTAP is not installed in the proof database"}


async def test_the_live_workers_with_what_each_can_make(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    worker = Worker(pool, Recording(), name="box-a", capacity=3)
    capabilities = Capabilities(domains=("python-backend", "marketing-copy"), disabled=NO_PGTAP)
    await Registration(
        pool, worker, heartbeat_timeout=timedelta(minutes=1), capabilities=capabilities
    ).take()
    # Silent for longer than the heartbeat timeout: no longer live.
    await pool.execute(
        """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots, domains)
           VALUES ('gone', 'gone:box-b:7', now() - interval '1 hour',
                   now() - interval '61 seconds', 4, '{sql-data}')"""
    )

    answer = await client.get("/v1/workers", headers=bearer(keys["admin"]))

    assert answer.status_code == 200, answer.text
    [shown] = answer.json()["workers"]
    assert set(shown) == {
        "name",
        "started_at",
        "heartbeat_at",
        "domains",
        "disabled",
        "slots",
        "running",
    }
    assert {key: shown[key] for key in ("name", "domains", "disabled", "slots", "running")} == {
        "name": "box-a",
        "domains": ["python-backend", "marketing-copy"],
        "disabled": NO_PGTAP,
        "slots": 3,
        "running": 0,
    }
    assert shown["heartbeat_at"].endswith("Z")
    for role in ("candidate_app", "qa_reviewer"):
        refused = await client.get("/v1/workers", headers=bearer(keys[role]))
        assert_problem(refused, 403)
