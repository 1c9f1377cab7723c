"""The whole loop over HTTP with a real `warmpool serve` (API, worker and scheduler in one
process): an empty pool is replenished through the offline provider, reviewers approve over the
API, the user who waited gets the mission made for them, candidates are served from the pool,
missions retire at their limit, the pool refills."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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
# Two approved missions of two serves each: the waiting user takes one serve at approval, so
# of six candidates the first three are served and the other three get jobs.
CANDIDATES = 6
SERVED = [200, 200, 200, 202, 202, 202]


async def read(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> Any:
    response = await client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def assert_served_at_approval(
    client: httpx.AsyncClient, app: dict[str, str], job_id: str, mission_id: int
) -> None:
    """The waiting user's job completed with their instance of the mission made for them."""
    job = await read(client, f"/v1/jobs/{job_id}", app)
    assert (job["status"], job["error"], job["mission_id"]) == ("completed", None, str(mission_id))
    assert job["instance_id"] is not None
    instance = await read(client, f"/v1/instances/{job['instance_id']}", app)
    assert (instance["user_id"], instance["mission_id"], instance["serve_number"]) == (
        "early",
        str(mission_id),
        1,
    )


async def serve_candidates(client: httpx.AsyncClient, app: dict[str, str]) -> list[int]:
    served = []
    for index in range(CANDIDATES):
        user_id = f"candidate-{index}"
        answer = await client.post(
            "/v1/serve", json={"user_id": user_id, "track": "backend-engineer"}, headers=app
        )
        served.append(answer.status_code)
        if answer.status_code == 202:
            assert answer.json()["job"]["user_id"] == user_id
    return served


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
        """The missions in review, once there are two and the waiting user's is one."""
        nonlocal highest_in_flight
        generating = await pool.fetchval(
            "SELECT count(*) FROM generation_jobs WHERE status = 'generating'"
        )
        highest_in_flight = max(highest_in_flight, generating)
        rows = await pool.fetch(
            "SELECT id, requested_by FROM missions WHERE qa_status = 'awaiting_review' ORDER BY id"
        )
        ready = len(rows) >= 2 and any(row["requested_by"] == "early" for row in rows)
        return [row["id"] for row in rows] if ready else []

    with running_server(database_url, tmp_path, worker=True, overrides=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            reviewer = {"Authorization": f"Bearer {keys['qa_reviewer']}"}
            app = {"Authorization": f"Bearer {keys['candidate_app']}"}
            admin = {"Authorization": f"Bearer {keys['admin']}"}

            # The empty pool: a serve enqueues a generation for the waiting user.
            first = await client.post(
                "/v1/serve", json={"user_id": "early", "track": "backend-engineer"}, headers=app
            )
            assert first.status_code == 202
            early_job = first.json()["job"]
            assert (early_job["lane"], early_job["user_id"]) == ("interactive", "early")

            # Replenishment fills the pool to its target; reviewers see the proven missions.
            made = await eventually(
                awaiting_review, 120, "two missions in review, early's among them", every=0.2
            )
            listed = (await read(client, "/v1/qa/missions", reviewer))["missions"]
            assert listed[0]["requested_by"] == "early", (
                "the waiting user's mission is reviewed first"
            )
            early_mission = int(listed[0]["id"])
            waiting = await read(client, f"/v1/jobs/{early_job['id']}", app)
            assert (waiting["status"], waiting["mission_id"], waiting["instance_id"]) == (
                "awaiting_review",
                str(early_mission),
                None,
            )
            # Early's mission and one made for the pool are approved: four serves in all.
            approved_ids = [early_mission, next(m for m in made if m != early_mission)]
            for mission_id in approved_ids:
                detail = await read(client, f"/v1/qa/missions/{mission_id}", reviewer)
                assert detail["proof"]["gold"]["passed"] == detail["proof"]["gold"]["total"] > 0
                assert (detail["serve_count"], detail["max_serves"]) == (0, 2)
                approved = await client.post(
                    f"/v1/qa/missions/{mission_id}/approve", json={}, headers=reviewer
                )
                assert approved.status_code == 200
            await assert_served_at_approval(client, app, early_job["id"], early_mission)

            # Each serve after a bug's first is a rendering of its own: the replenisher orders
            # them as the missions are approved, and the worker proves them.
            async def renderings_ready() -> bool:
                pool_view = await read(client, "/v1/pool", admin)
                return bool(pool_view["domains"][0]["renderings_ready"] == 3)

            await eventually(renderings_ready, 60, "a rendering for each serve left", every=0.2)

            # Served from the pool until both missions retire (two serves each).
            served = await serve_candidates(client, app)
            assert served == SERVED, "three serves were left; then stock ran out: jobs"
            instances = await pool.fetch(
                "SELECT user_id, mission_id FROM mission_instances ORDER BY user_id"
            )
            assert [row["user_id"] for row in instances] == [
                "candidate-0",
                "candidate-1",
                "candidate-2",
                "early",
            ]
            assert sorted(row["mission_id"] for row in instances) == sorted(approved_ids * 2)
            files = await pool.fetch("SELECT mission_id, files::text FROM mission_instances")
            assert len({tuple(row) for row in files}) == 4, "no two instances share their files"
            retired = await pool.fetch(
                "SELECT id, serve_count, max_serves, retire_reason, retired_at FROM missions"
                " WHERE retired_at IS NOT NULL ORDER BY id"
            )
            assert [tuple(row)[:4] for row in retired] == [
                (mission_id, 2, 2, "served 2 times") for mission_id in sorted(approved_ids)
            ], "both approved missions retired at their limit, and nothing else"

            # The pool refills: replenishment orders new missions once the old ones retired,
            # and they come for review (the candidates' own jobs do not count).
            async def refilled() -> bool:
                return bool(
                    await pool.fetchval(
                        """SELECT count(*) FROM missions m
                           JOIN generation_jobs j ON j.id = m.job_id
                           WHERE m.qa_status = 'awaiting_review' AND j.lane = 'replenish'
                             AND j.created_at > $1""",
                        max(row["retired_at"] for row in retired),
                    )
                )

            await eventually(refilled, 120, "the pool to refill", every=0.2)
    assert 0 < highest_in_flight <= 2, "within the global cap"
