"""A cohort clicks at once: 200 simultaneous serves against a small pool, over real HTTP."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import asyncpg
import httpx
import pytest

from core.domains import Domain, DomainMap, load
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import Ledger
from generation.pipeline import MissionPipeline
from pool import waiting
from tests.support.jobs import enqueue
from tests.support.missions import add_mission
from tests.support.pipelines import run_pending
from tests.support.providers import FreeOfCharge
from tests.support.server import create_keys, running_server

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("standing_worker")]

USERS = 200
# Jitter on: each mission's limit is 25 lowered by 0 to a tenth (2), seeded by its job.
# Missions of language `none` skip the proof, so the pipeline needs no prover here.
JITTERED_MAP = """
tracks:
  marketing-manager: [marketing-copy]
domains:
  marketing-copy:
    kind: non_technical
    language: none
    target: 4
    retire_after: 25
    retire_jitter: true
"""


class LaunchEmails(FreeOfCharge):
    """A provider of distinct no-code missions, one per job (the offline catalog has too few
    of language `none` for four jobs: repeats would be discarded as duplicates)."""

    name = "launch-emails"

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        async with ledger.call("generate", self.name, "script"):
            return MissionDraft(
                title=f"Launch email {seed}",
                brief="Proofread the email: the sale ends on Friday.",
                gold_files={"email.md": f"Sale number {seed} ends on Friday.\n"},
                test_files={},
            )

    async def plant_bug(
        self, domain: Domain, mission: MissionDraft, *, seed: int, try_number: int, ledger: Ledger
    ) -> SabotageDraft:
        async with ledger.call("sabotage", self.name, "script"):
            email = mission.gold_files["email.md"]
            return SabotageDraft(
                sabotaged_files={"email.md": email.replace("Friday", "Monday")},
                bug_summary="the email says the sale ends on Monday",
                grader_hint="the day",
            )


async def serve_at_once(url: str, key: str, track: str) -> list[httpx.Response]:
    """USERS serves for as many users, all sent at once; the answers in order."""
    async with httpx.AsyncClient(
        base_url=url, timeout=60, limits=httpx.Limits(max_connections=USERS)
    ) as client:
        return await asyncio.gather(
            *(
                client.post(
                    "/v1/serve",
                    json={"user_id": f"candidate-{index}", "track": track},
                    headers={"Authorization": f"Bearer {key}"},
                )
                for index in range(USERS)
            )
        )


async def generate_missions(
    pool: asyncpg.Pool, domain_map: DomainMap, domain: str, count: int
) -> list[int]:
    """`count` missions made as a worker makes them: replenish jobs through the queue, run by
    the mission pipeline, which stores each mission with its serve limit."""
    jobs = [await enqueue(pool, None, domain=domain) for _ in range(count)]
    pipeline = MissionPipeline(
        db=pool,
        provider=LaunchEmails(),
        prover=None,
        trust="trusted",
        domain_map=domain_map,
        sabotage_tries=1,
        serve_waiting_user=waiting.serve_waiting_user,
    )
    await run_pending(pool, pipeline, count=count)
    rows = await pool.fetch(
        "SELECT status, error, mission_id FROM generation_jobs WHERE id = ANY($1) ORDER BY id",
        jobs,
    )
    assert [(row["status"], row["error"]) for row in rows] == [("completed", None)] * count
    return [row["mission_id"] for row in rows]


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
        sampler = asyncio.create_task(sample_spread())
        answers = await serve_at_once(url, keys["candidate_app"], "backend-engineer")
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


async def test_two_api_processes_serving_at_once_keep_every_limit(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """The 200 serves split between two API processes, and half of each process's with an
    Idempotency-Key (claim, serve and record in one transaction), half without (the serve's
    statement alone): every mission served exactly 25 times, every bug 5, no user twice."""
    missions = [await add_mission(pool, max_serves=25, variants=5, bug_share=5) for _ in range(4)]
    keys = await create_keys(database_url)
    with (
        running_server(database_url, tmp_path) as first,
        running_server(database_url, tmp_path) as second,
    ):
        async with httpx.AsyncClient(
            timeout=60, limits=httpx.Limits(max_connections=USERS)
        ) as client:
            answers = await asyncio.gather(
                *(
                    client.post(
                        f"{(first, second)[index % 2]}/v1/serve",
                        json={"user_id": f"candidate-{index}", "track": "backend-engineer"},
                        headers={"Authorization": f"Bearer {keys['candidate_app']}"}
                        | ({"Idempotency-Key": f"serve-{index}"} if index % 4 < 2 else {}),
                    )
                    for index in range(USERS)
                )
            )

    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {200: 100, 202: 100}, statuses
    served = [answer.json()["instance"] for answer in answers if answer.status_code == 200]
    assert Counter(instance["mission_id"] for instance in served) == {
        str(mission): 25 for mission in missions
    }
    assert sorted(Counter(instance["variant_id"] for instance in served).values()) == [5] * 20
    rows = await pool.fetch(
        """SELECT v.serve_count, count(i.id) AS instances FROM mission_variants v
           LEFT JOIN mission_instances i ON i.variant_id = v.id
           WHERE v.mission_id = ANY($1) GROUP BY v.id""",
        missions,
    )
    assert {(row["serve_count"], row["instances"]) for row in rows} == {(5, 5)}
    assert (
        await pool.fetchval("SELECT count(DISTINCT (mission_id, user_id)) FROM mission_instances")
        == 100
    )
    keyed = Counter(answer.status_code for index, answer in enumerate(answers) if index % 4 < 2)
    recorded = await pool.fetchrow(
        """SELECT count(*) FILTER (WHERE instance_id IS NOT NULL) AS instances,
                  count(*) FILTER (WHERE job_id IS NOT NULL) AS jobs
           FROM idempotency_keys"""
    )
    assert recorded is not None, "an aggregate returns one row"
    print(f"with a key: {dict(keyed)}; without: {dict(statuses - keyed)}")
    assert (recorded["instances"], recorded["jobs"]) == (keyed[200], keyed[202]), (
        "each keyed serve's key records what it made, and only those"
    )


async def test_with_jitter_200_simultaneous_serves_give_exactly_the_missions_own_limits(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    map_file = tmp_path / "domain_map.yaml"
    map_file.write_text(JITTERED_MAP)
    domain_map = load(map_file)
    missions = await generate_missions(pool, domain_map, "marketing-copy", 4)
    rows = await pool.fetch("SELECT id, max_serves FROM missions WHERE id = ANY($1)", missions)
    limits = {str(row["id"]): row["max_serves"] for row in rows}
    assert len(limits) == 4
    print(f"serve limits: {limits}")
    # The jitter's contract: retire_after (25), lowered by at most a tenth of it (2).
    assert all(23 <= limit <= 25 for limit in limits.values()), limits
    assert len(set(limits.values())) > 1, f"the limits should differ: {limits}"
    stock = sum(limits.values())

    keys = await create_keys(database_url)
    with running_server(
        database_url, tmp_path, overrides={"WARMPOOL_DOMAIN_MAP": str(map_file)}
    ) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            for mission in limits:
                approved = await client.post(
                    f"/v1/qa/missions/{mission}/approve",
                    json={},
                    headers={"Authorization": f"Bearer {keys['qa_reviewer']}"},
                )
                assert approved.status_code == 200, approved.text
        answers = await serve_at_once(url, keys["candidate_app"], "marketing-manager")

    statuses = Counter(answer.status_code for answer in answers)
    assert statuses == {200: stock, 202: USERS - stock}, (statuses, limits)
    served = Counter(
        answer.json()["instance"]["mission_id"] for answer in answers if answer.status_code == 200
    )
    assert served == limits, "each mission served exactly its own limit, none beyond it"
    rows = await pool.fetch(
        "SELECT id, serve_count, max_serves, retired_at FROM missions WHERE id = ANY($1)",
        missions,
    )
    assert all(
        row["serve_count"] == row["max_serves"] and row["retired_at"] is not None for row in rows
    ), [dict(row) for row in rows]
    assert await pool.fetchval("SELECT count(*) FROM mission_instances") == stock
    assert (
        await pool.fetchval("SELECT count(*) FROM generation_jobs WHERE lane = 'interactive'")
        == USERS - stock
    )
