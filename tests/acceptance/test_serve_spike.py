"""A cohort clicks at once: 200 simultaneous serves against a small pool, over real HTTP."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.missions import add_mission
from tests.support.server import create_keys, running_server

pytestmark = pytest.mark.slow


async def test_200_simultaneous_serves_give_exactly_the_stock_then_jobs(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    missions = [await add_mission(pool, max_serves=25) for _ in range(4)]
    never = [
        await add_mission(pool, qa_status="awaiting_review"),
        await add_mission(pool, qa_status="rejected"),
        await add_mission(pool, retired=True),
        await add_mission(pool, "marketing-copy"),
    ]
    keys = await create_keys(database_url)
    spreads: list[int] = []
    done = asyncio.Event()

    async def sample_spread() -> None:
        # While stock lasts, least-served first keeps the committed counts within one.
        async with pool.acquire() as sampler:
            while not done.is_set():
                counts = await sampler.fetch(
                    "SELECT serve_count FROM missions WHERE id = ANY($1) AND retired_at IS NULL",
                    missions,
                )
                if len(counts) == 4:
                    spreads.append(
                        max(c["serve_count"] for c in counts)
                        - min(c["serve_count"] for c in counts)
                    )
                await asyncio.sleep(0.001)

    with running_server(database_url, tmp_path) as url:
        async with httpx.AsyncClient(
            base_url=url, timeout=60, limits=httpx.Limits(max_connections=200)
        ) as client:
            sampler = asyncio.create_task(sample_spread())
            answers = await asyncio.gather(
                *(
                    client.post(
                        "/v1/serve",
                        json={"user_id": f"candidate-{index}", "track": "backend-engineer"},
                        headers={"Authorization": f"Bearer {keys['candidate_app']}"},
                    )
                    for index in range(200)
                )
            )
            done.set()
            await sampler

    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {200: 100, 202: 100}, statuses
    served = Counter(
        answer.json()["instance"]["mission_id"] for answer in answers if answer.status_code == 200
    )
    assert served == {str(mission): 25 for mission in missions}
    rows = await pool.fetch(
        "SELECT id, serve_count, retired_at FROM missions WHERE id = ANY($1)", missions
    )
    assert all(row["serve_count"] == 25 and row["retired_at"] is not None for row in rows)
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM mission_instances WHERE mission_id = ANY($1)", never
        )
        == 0
    )
    assert (
        await pool.fetchval("SELECT count(DISTINCT (mission_id, user_id)) FROM mission_instances")
        == 100
    )
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE lane = 'interactive'")
        == 100
    )
    print(f"spread sampled {len(spreads)} times: {Counter(spreads)}")
    assert spreads
    assert max(spreads) <= 1
