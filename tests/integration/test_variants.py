"""Bug variants and cohorts on the serve path: each planted bug of a mission goes to at most its
share of candidates, each cohort gets a mission at most its domain's cohort_share times, under
real concurrent serves; and a reviewer retires one variant.

The missions here are written straight into the database, each variant with one rendering
that serves its whole share, so that serving is tested apart from how renderings are made; the
same 200 serves over renderings that rendering jobs made and proved, each served once, are in
tests/integration/proof/test_rendering_jobs.py."""

import asyncio
from collections import Counter

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from core import domains
from core.domains import DomainMap
from pool import requests, reviews, stats
from pool.replenish import VARIANT_FAILURES_TO_GIVE_UP, Replenisher
from pool.stats import RENDERING_FAILURES_TO_GIVE_UP
from qa import rendered
from qa.missions import MissionProof, store_variant
from qa.renderings import RenderingProof
from qa.results import TestResult, proof_run
from server.auth import Role
from server.settings import Settings
from tests.support import serving
from tests.support.http import assert_problem, bearer
from tests.support.jobs import LIMITS
from tests.support.missions import add_mission
from tests.support.proven_missions import PROOF, store_mission

Client = AsyncTestClient[Litestar]
HEARTBEAT_TIMEOUT = Settings().heartbeat_timeout
TRACK = "backend-engineer"
# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")


def shares_map(*, cohort_share: int | None = None) -> DomainMap:
    """One python domain: missions served 25 times, each bug at most 5 times, no jitter."""
    python: dict[str, object] = {
        "kind": "technical",
        "language": "python",
        "target": 4,
        "retire_after": 25,
        "retire_jitter": False,
        "bug_share": 5,
    }
    if cohort_share is not None:
        python["cohort_share"] = cohort_share
    return domains.parse(
        {"tracks": {TRACK: ["python-backend"]}, "domains": {"python-backend": python}}, "test map"
    )


async def serve_all(
    pool: asyncpg.Pool, domain_map: DomainMap, users: list[str], cohort: str | None = None
) -> list[requests.Answer]:
    return await serving.serve_all(pool, domain_map, users, track=TRACK, cohort=cohort)


async def four_missions_of_five_bugs(pool: asyncpg.Pool) -> list[int]:
    return [await add_mission(pool, max_serves=25, variants=5, bug_share=5) for _ in range(4)]


async def test_200_concurrent_serves_give_each_bug_to_at_most_its_share(
    pool: asyncpg.Pool,
) -> None:
    missions = await four_missions_of_five_bugs(pool)
    answers = await serve_all(pool, shares_map(), [f"candidate-{n}" for n in range(200)])

    instances = [answer.instance for answer in answers if answer.instance is not None]
    assert len(instances) == 100, "exactly the stock: 4 missions of 25 serves"
    assert sum(answer.job is not None for answer in answers) == 100, "the rest enqueued"
    assert Counter(i.mission_id for i in instances) == dict.fromkeys(missions, 25)
    by_variant = Counter(instance.variant_id for instance in instances)
    assert sorted(by_variant.values()) == [5] * 20, by_variant
    assert len({(i.mission_id, i.user_id) for i in instances}) == 100
    # Each instance carries its variant's bug; the table agrees with the answers.
    rows = await pool.fetch(
        """SELECT v.id, v.serve_count, v.retired_at, count(i.id) AS instances
           FROM mission_variants v LEFT JOIN mission_instances i ON i.variant_id = v.id
           WHERE v.mission_id = ANY($1) GROUP BY v.id""",
        missions,
    )
    assert all(
        row["serve_count"] == row["instances"] == 5 and row["retired_at"] is not None
        for row in rows
    ), [dict(row) for row in rows]


async def test_a_cohort_gets_a_mission_at_most_its_share_and_others_are_unaffected(
    pool: asyncpg.Pool,
) -> None:
    missions = await four_missions_of_five_bugs(pool)
    domain_map = shares_map(cohort_share=2)
    answers = await serve_all(
        pool, domain_map, [f"round-1-{n}" for n in range(20)], cohort="acme-round-1"
    )

    instances = [answer.instance for answer in answers if answer.instance is not None]
    assert Counter(i.mission_id for i in instances) == dict.fromkeys(missions, 2)
    assert {i.cohort for i in instances} == {"acme-round-1"}
    # A serve no mission can satisfy within the share enqueues a generation for its user.
    jobs = [answer.job for answer in answers if answer.job is not None]
    assert len(jobs) == 12
    assert all(job.lane == "interactive" for job in jobs)
    cohorts = await pool.fetch(
        "SELECT DISTINCT cohort FROM generation_jobs WHERE id = ANY($1)",
        [job.id for job in jobs],
    )
    assert [row["cohort"] for row in cohorts] == ["acme-round-1"]

    [outside] = await serve_all(pool, domain_map, ["someone-else"])
    assert outside.instance is not None
    assert outside.instance.cohort is None
    [other_cohort] = await serve_all(pool, domain_map, ["round-2-0"], cohort="acme-round-2")
    assert other_cohort.instance is not None


async def test_the_least_served_variant_is_served_first(pool: asyncpg.Pool) -> None:
    mission = await add_mission(pool, max_serves=25, variants=3, bug_share=5)
    domain_map = shares_map()
    served = []
    for n in range(6):
        [answer] = await serve_all(pool, domain_map, [f"one-by-one-{n}"])
        assert answer.instance is not None
        assert answer.instance.mission_id == mission
        served.append(answer.instance.variant_id)
    assert served[:3] == sorted(served[:3])
    assert len(set(served[:3])) == 3
    assert served[3:] == served[:3], "round and round: the least served, then the oldest"


async def test_a_mission_without_a_live_variant_is_not_served(pool: asyncpg.Pool) -> None:
    await add_mission(pool, max_serves=25, variants=1, bug_share=2)
    answers = [(await serve_all(pool, shares_map(), [f"user-{n}"]))[0] for n in range(3)]
    assert [answer.instance is not None for answer in answers] == [True, True, False]
    assert answers[2].job is not None, "served out of bugs is out of stock: a job for the user"


async def test_the_qa_view_lists_variants_and_a_reviewer_retires_one(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, settings: Settings
) -> None:
    domain = domains.load(settings.domain_map).domains["python-backend"]
    mission = await store_mission(pool, domain)
    await add_variant(pool, mission)
    reviewer = bearer(keys["qa_reviewer"])
    await client.post(f"/v1/qa/missions/{mission}/approve", json={}, headers=reviewer)

    view = (await client.get(f"/v1/qa/missions/{mission}", headers=reviewer)).json()
    first, second = view["variants"]
    assert view["sabotaged_files"] == first["sabotaged_files"]
    assert view["bug_summary"] == first["bug_summary"]
    assert first["proof"]["verdict"].startswith("proven")
    assert (first["serve_count"], first["max_serves"]) == (0, domain.bug_share)
    assert "pricing.py" in first["diff"]
    assert first["retired_at"] is None

    retire = f"/v1/qa/missions/{mission}/variants/{first['id']}/retire"
    retired = await client.post(retire, json={"reason": "posted online"}, headers=reviewer)
    assert retired.status_code == 200, retired.text
    variants = retired.json()["variants"]
    assert variants[0]["retired_at"] is not None
    assert variants[0]["retired_by"] is not None
    assert variants[1]["retired_at"] is None
    assert retired.json()["retired_at"] is None
    again = await client.post(retire, json={"reason": "twice"}, headers=reviewer)
    assert_problem(again, 409, "already retired", "posted online")
    unknown = f"/v1/qa/missions/{mission}/variants/999999/retire"
    assert_problem(await client.post(unknown, json={"reason": "x"}, headers=reviewer), 404)
    assert_problem(await client.post(retire, json={"reason": " "}, headers=reviewer), 422)

    # Only the other bug is served now.
    served = await client.post(
        "/v1/serve",
        json={"user_id": "ada", "track": TRACK, "cohort": "class of 2026"},
        headers=bearer(keys["candidate_app"]),
    )
    assert served.status_code == 200, served.text
    instance = served.json()["instance"]
    assert (instance["variant_id"], instance["cohort"]) == (second["id"], "class of 2026")
    assert instance["files"]["pricing.py"] == second["sabotaged_files"]["pricing.py"]


async def add_variant(pool: asyncpg.Pool, mission_id: int) -> None:
    """A second bug in the mission, stored as a variant job stores it."""
    gold = await pool.fetchval("SELECT gold_files FROM missions WHERE id = $1", mission_id)
    sabotaged = gold | {"pricing.py": gold["pricing.py"].replace("round(", "int(", 1)}
    await store_variant(
        pool,
        domain=domains.load(Settings().domain_map).domains["python-backend"],
        mission_id=mission_id,
        sabotaged_files=sabotaged,
        bug_summary="total() truncates instead of rounding.",
        grader_hint="round, not int",
        proof=MissionProof(gold=PROOF.gold, sabotage_tries=PROOF.sabotage_tries, verdict="proven"),
        provider="offline",
        job_id=None,
        max_serves=5,
    )


async def test_bad_cohorts_are_422(client: Client, keys: dict[Role, str]) -> None:
    headers = bearer(keys["candidate_app"])
    for cohort, words in (("", "empty"), ("c" * 201, "200"), ("a\x00", "NUL")):
        body = {"user_id": "ada", "track": TRACK, "cohort": cohort}
        assert_problem(await client.post("/v1/serve", json=body, headers=headers), 422, words)


async def test_the_replenisher_stops_planting_in_a_mission_whose_variant_jobs_keep_failing(
    pool: asyncpg.Pool,
) -> None:
    stuck = await add_mission(pool, max_serves=25, variants=1, bug_share=5)
    fresh = await add_mission(pool, max_serves=25, variants=1, bug_share=5)
    for _ in range(VARIANT_FAILURES_TO_GIVE_UP):
        await pool.execute(
            """INSERT INTO generation_jobs (lane, domain, status, fair_time, variant_of, error)
               VALUES ('replenish', 'python-backend', 'failed', now(), $1, 'no new bug')""",
            stuck,
        )
    replenisher = Replenisher(
        pool, shares_map(), LIMITS, max_per_pass=10, heartbeat_timeout=HEARTBEAT_TIMEOUT
    )
    result = await replenisher.run_once()
    ordered = [int(job) for each in result.domains for job in each.variant_jobs]
    rows = await pool.fetch(
        "SELECT variant_of, count(*) FROM generation_jobs WHERE id = ANY($1) GROUP BY 1", ordered
    )
    # 20 serves the first bug does not cover: four more bugs, all for the fresh mission.
    assert {row["variant_of"]: row["count"] for row in rows} == {fresh: 4}


async def test_the_replenisher_renders_variants_until_their_rendering_jobs_keep_failing(
    pool: asyncpg.Pool,
) -> None:
    domain_map = shares_map()
    python = domain_map.domains["python-backend"]
    stuck, fresh = [await store_mission(pool, python) for _ in range(2)]
    await pool.execute("UPDATE missions SET qa_status = 'approved'")
    variant_of = {
        row["mission_id"]: row["id"]
        for row in await pool.fetch("SELECT id, mission_id FROM mission_variants")
    }
    for _ in range(RENDERING_FAILURES_TO_GIVE_UP):
        await pool.execute(
            """INSERT INTO generation_jobs (lane, domain, status, fair_time, rendering_of, error)
               VALUES ('replenish', 'python-backend', 'failed', now(), $1, 'no rendering')""",
            variant_of[stuck],
        )
    # Each bug's identity rendering serves once: the other four serves of each wait for
    # renderings, and those of the stuck bug will never come.
    counted = (await stats.count(pool, domain_map))["python-backend"].measured
    assert (counted.servable_serves, counted.renderings_ready, counted.stock_serves) == (2, 2, 6)

    replenisher = Replenisher(
        pool, domain_map, LIMITS, max_per_pass=10, heartbeat_timeout=HEARTBEAT_TIMEOUT
    )
    result = await replenisher.run_once()
    ordered = [int(job) for each in result.domains for job in each.rendering_jobs]
    rows = await pool.fetch(
        "SELECT rendering_of, count(*) FROM generation_jobs WHERE id = ANY($1) GROUP BY 1",
        ordered,
    )
    assert {row["rendering_of"]: row["count"] for row in rows} == {variant_of[fresh]: 1}
    again = await replenisher.run_once()
    assert [job for each in again.domains for job in each.rendering_jobs] == [], "under way"
    assert (await stats.count(pool, domain_map))["python-backend"].measured.rendering_jobs == 1


# A mission's ready_serves beside what its variants hold (migration 0031).
READY_SERVES = """
SELECT m.ready_serves,
       (SELECT sum(CASE WHEN v.retired_at IS NULL
                        THEN least(v.rendered_serves, v.max_serves) - v.serve_count
                        ELSE 0 END)
        FROM mission_variants v WHERE v.mission_id = m.id)::int AS held
FROM missions m WHERE m.id = $1
"""


async def counted(pool: asyncpg.Pool, mission: int) -> tuple[int, int]:
    row = await pool.fetchrow(READY_SERVES, mission)
    assert row is not None
    return row["ready_serves"], row["held"]


def proven_rendering(number: int, files: dict[str, str]) -> rendered.ProvenRendering:
    run = proof_run(
        language="python",
        trust="trusted",
        confinement="limits",
        command="pytest",
        duration_s=0.1,
        log="",
        tests=[TestResult(id="test_it", outcome="passed")],
        problem=None,
    )
    return rendered.ProvenRendering(
        number=number,
        gold_files={"solution.py": "GOLD = True\n"},
        test_files={"test_solution.py": "def test_it(): pass\n"},
        hidden_test_files={},
        sabotaged_files=files | {"rendering.py": f"NUMBER = {number}\n"},
        proof=RenderingProof(accepted=True, reason="test", gold=run, sabotage=run),
    )


async def test_a_missions_ready_serves_are_what_its_variants_hold_under_concurrent_changes(
    pool: asyncpg.Pool,
) -> None:
    """Serves, renderings stored and a variant retired, all at once on real connections: the
    count the serve reads from the mission's row stays what its variants hold, and the writers
    of the mission's and the variants' rows never deadlock."""
    mission = await add_mission(pool, max_serves=25, variants=4, bug_share=5)
    # As in a domain with code: each bug's identity rendering serves once. Proven, for the
    # reviewer's view of the mission.
    await pool.execute(
        "UPDATE mission_variants SET rendered_serves = 1, proof = $2 WHERE mission_id = $1",
        mission,
        PROOF,
    )
    await pool.execute("UPDATE missions SET proof = $2 WHERE id = $1", mission, PROOF)
    await pool.execute(
        "UPDATE mission_renderings SET max_serves = 1 WHERE mission_id = $1", mission
    )
    assert await counted(pool, mission) == (4, 4)
    variants = await pool.fetch(
        "SELECT id, sabotaged_files FROM mission_variants WHERE mission_id = $1 ORDER BY id",
        mission,
    )

    async def render(index: int) -> None:
        variant = rendered.VariantToRender(
            id=variants[index]["id"],
            mission_id=mission,
            gold_files={},
            test_files={},
            hidden_test_files={},
            sabotaged_files=variants[index]["sabotaged_files"],
            reference=proven_rendering(0, {}).proof.sabotage,
            hidden_reference=None,
            lacking=4,
            numbers_taken=frozenset(),
        )
        files = variants[index]["sabotaged_files"]
        async with pool.acquire() as connection, connection.transaction():
            numbers = range(10 * index + 1, 10 * index + 5)
            stored = [proven_rendering(number, files) for number in numbers]
            assert await rendered.store(connection, variant, stored) == 4

    users = [f"concurrent-{n}" for n in range(15)]
    await asyncio.gather(
        *(render(index) for index in range(3)),
        serve_all(pool, shares_map(), users),
        reviews.retire_variant(
            pool, mission, variants[3]["id"], reviewer="test", reason="it leaked"
        ),
    )
    ready, held = await counted(pool, mission)
    assert ready == held
    served = await pool.fetchval(
        "SELECT count(*) FROM mission_instances WHERE mission_id = $1", mission
    )
    # Three bugs of five serves each, rendered in full, and what the fourth served before it
    # was retired (at most its one identity rendering).
    assert (
        ready
        + served
        - await pool.fetchval(
            "SELECT serve_count FROM mission_variants WHERE id = $1", variants[3]["id"]
        )
        == 15
    )


async def test_a_serve_the_previous_release_makes_is_counted_on_the_mission_too(
    pool: asyncpg.Pool,
) -> None:
    """During a rolling deploy the previous release's API processes serve with their own
    statement, which raises a variant's count but not the mission's ready_serves: the trigger
    counts those, and only a serve of this release counts its own."""
    mission = await add_mission(pool, max_serves=25, variants=2, bug_share=5)
    assert await counted(pool, mission) == (10, 10)
    [answer] = await serve_all(pool, shares_map(), ["served-now"])
    assert answer.instance is not None
    assert await counted(pool, mission) == (9, 9)
    await pool.execute(
        """UPDATE mission_variants SET serve_count = serve_count + 1
           WHERE id = (SELECT min(id) FROM mission_variants WHERE mission_id = $1)""",
        mission,
    )
    assert await counted(pool, mission) == (8, 8)
