"""The whole loop over HTTP with a real `warmpool serve` (API, worker and scheduler in one
process): an empty pool is replenished through the offline provider, reviewers approve over the
API, candidates are served from the pool, missions retire at their limit, the pool refills."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.polling import eventually
from tests.support.proving import ensure_toolchain
from tests.support.server import create_keys, running_server

pytestmark = pytest.mark.slow

DOMAIN_MAP = """
tracks:
  backend-engineer: [python-backend]
domains:
  python-backend:
    kind: technical
    language: python
    target: 2
    retire_after: 2
    retire_jitter: false
"""


async def test_empty_pool_to_served_retired_and_refilled(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    await asyncio.to_thread(ensure_toolchain)
    domain_map = tmp_path / "domain_map.yaml"
    domain_map.write_text(DOMAIN_MAP)
    keys = await create_keys(database_url)
    settings = {
        "WARMPOOL_DOMAIN_MAP": str(domain_map),
        "WARMPOOL_GLOBAL_CAP": "2",
        "WARMPOOL_TICK_SECONDS": "0.5",
        "WARMPOOL_REPLENISH_SECONDS": "1",
    }
    highest_in_flight = 0

    async def awaiting_review() -> list[int]:
        nonlocal highest_in_flight
        generating = await pool.fetchval(
            "SELECT count(*) FROM generation_jobs WHERE status = 'generating'"
        )
        highest_in_flight = max(highest_in_flight, generating)
        rows = await pool.fetch(
            "SELECT id FROM missions WHERE qa_status = 'awaiting_review' ORDER BY id"
        )
        return [row["id"] for row in rows] if len(rows) >= 2 else []

    with running_server(database_url, tmp_path, worker=True, overrides=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            reviewer = {"Authorization": f"Bearer {keys['qa_reviewer']}"}
            app = {"Authorization": f"Bearer {keys['candidate_app']}"}

            # The empty pool: a serve enqueues a generation for the waiting user.
            first = await client.post(
                "/v1/serve", json={"user_id": "early", "track": "backend-engineer"}, headers=app
            )
            assert first.status_code == 202

            # Replenishment fills the pool to its target; reviewers see the proven missions.
            made = await eventually(awaiting_review, 120, "two missions in review", every=0.2)
            listed = (await client.get("/v1/qa/missions", headers=reviewer)).json()["missions"]
            assert listed[0]["requested_by"] == "early", (
                "the waiting user's mission is reviewed first"
            )
            for mission_id in made[:2]:
                detail = (
                    await client.get(f"/v1/qa/missions/{mission_id}", headers=reviewer)
                ).json()
                assert detail["proof"]["gold"]["passed"] == detail["proof"]["gold"]["total"] > 0
                approved = await client.post(
                    f"/v1/qa/missions/{mission_id}/approve", json={}, headers=reviewer
                )
                assert approved.status_code == 200

            # Served from the pool until both missions retire (two serves each).
            served = []
            for index in range(6):
                answer = await client.post(
                    "/v1/serve",
                    json={"user_id": f"candidate-{index}", "track": "backend-engineer"},
                    headers=app,
                )
                served.append(answer.status_code)
            instances = await pool.fetchval("SELECT count(*) FROM mission_instances")
            retired = await pool.fetch(
                "SELECT serve_count, max_serves FROM missions WHERE retired_at IS NOT NULL"
            )
            assert all(row["serve_count"] == row["max_serves"] == 2 for row in retired)
            early = await pool.fetchval(
                "SELECT count(*) FROM mission_instances WHERE user_id = 'early'"
            )
            assert instances == served.count(200) + early
            assert served.count(200) >= 1
            assert 202 in served, "stock ran out: the next users get jobs"

            # The pool refills: new missions come for review once the old ones retired.
            async def refilled() -> bool:
                return bool(
                    await pool.fetchval(
                        "SELECT count(*) FROM missions WHERE qa_status = 'awaiting_review' AND id > $1",
                        max(made),
                    )
                )

            await eventually(refilled, 120, "the pool to refill", every=0.2)
    assert 0 < highest_in_flight <= 2, "within the global cap"
