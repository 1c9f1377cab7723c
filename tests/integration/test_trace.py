"""Tracing leaks over HTTP: instances served one rendering are matches alike; texts too short or
too big are refused; a reviewer traces a leak on the page and retires its variant; the lookup
reads the fingerprints through their index. Renderings here are written straight into the
database; tests/integration/proof/test_trace_renderings.py traces instances of renderings that
rendering jobs made and proved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from core import domains
from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from generation.renderings import Renderer, Sources
from qa import trace
from server.auth import Role
from tests.support.http import assert_problem, bearer, form_token, sign_in
from tests.support.leaks import longest_file, reformatted_fragment
from tests.support.missions import add_mission
from tests.support.proven_missions import PROOF, store_mission

Client = AsyncTestClient[Litestar]
ROOT = Path(__file__).resolve().parents[2]
RENDERINGS = 3
pytestmark = pytest.mark.usefixtures("standing_worker")

PYTHON = [mission for mission in catalog.load() if mission.language == "python"]
SERVED = PYTHON[0]


async def store_renderings(
    pool: asyncpg.Pool,
    mission: CatalogMission,
    *,
    renderings: int = RENDERINGS,
    serves_each: int = 1,
) -> None:
    """A mission whose one variant is the catalog's bug, served in `renderings` renderings,
    each to `serves_each` candidates."""
    mission_id = await add_mission(pool, max_serves=renderings * serves_each)
    variant_id = await pool.fetchval(
        "SELECT id FROM mission_variants WHERE mission_id = $1", mission_id
    )
    # Every instance of this run is a rendering of its own: the identity one is not served.
    await pool.execute(
        "UPDATE mission_renderings SET status = 'discarded' WHERE variant_id = $1", variant_id
    )
    sabotage = saboteur.sabotage(mission, seed=1, try_number=1)
    renderer = Renderer(
        Sources(
            gold_files=mission.gold_files,
            test_files=mission.test_files,
            sabotaged_files=sabotage.sabotaged_files,
        ),
        language="python",
        domain="python-backend",
    )
    for number in range(renderings):
        rendering = renderer.render(number)
        await pool.execute(
            """INSERT INTO mission_renderings (variant_id, mission_id, number, files, gold_files,
                   test_files, hidden_test_files, renderer, proof, status, max_serves)
               VALUES ($1, $2, $3, $4, $5, $6, '{}', 'renamed', '{"verdict": "test"}', 'ready',
                       $7)""",
            variant_id,
            mission_id,
            number,
            rendering.sabotaged_files | rendering.test_files,
            rendering.gold_files,
            rendering.test_files,
            serves_each,
        )


async def serve(client: Client, key: str, user: str) -> dict[str, Any]:
    answer = await client.post(
        "/v1/serve", json={"user_id": user, "track": "backend-engineer"}, headers=bearer(key)
    )
    assert answer.status_code == 200, answer.text
    instance: dict[str, Any] = answer.json()["instance"]
    return instance


async def traced(client: Client, key: str, text: str) -> list[dict[str, Any]]:
    answer = await client.post("/v1/qa/trace", json={"text": text}, headers=bearer(key))
    assert answer.status_code == 200, answer.text
    matches: list[dict[str, Any]] = answer.json()["matches"]
    return matches


async def test_instances_served_one_rendering_are_all_matches_scored_alike(
    client: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    await store_renderings(pool, SERVED, renderings=1, serves_each=3)
    instances = [await serve(client, keys["candidate_app"], f"user-{n}") for n in range(3)]
    matches = await traced(client, keys["qa_reviewer"], json.dumps(instances[0]["files"]))
    assert [match["instance_id"] for match in matches] == [i["id"] for i in instances]
    assert {match["score"] for match in matches} == {1.0}


async def test_a_stored_variants_rendering_is_fingerprinted_as_it_is_stored(
    pool: asyncpg.Pool,
) -> None:
    python = domains.load(ROOT / "domain_map.yaml").domains["python-backend"]
    mission_id = await store_mission(pool, python)
    renderings = await pool.fetch(
        """SELECT r.id, r.fingerprinted_at,
                  (SELECT count(*) FROM rendering_fingerprints f WHERE f.rendering_id = r.id)
                      AS fingerprints
           FROM mission_renderings r JOIN mission_variants v ON v.id = r.variant_id
           WHERE v.mission_id = $1""",
        mission_id,
    )
    assert renderings
    for rendering in renderings:
        assert rendering["fingerprinted_at"] is not None
        assert rendering["fingerprints"] > 0


async def test_a_short_fragment_and_an_oversized_text_are_refused(
    client: Client, keys: dict[Role, str]
) -> None:
    reviewer = bearer(keys["qa_reviewer"])
    short = "\n\n".join(f"line_{number} = {number}" for number in range(trace.MIN_LINES - 1))
    answer = await client.post("/v1/qa/trace", json={"text": short}, headers=reviewer)
    assert_problem(answer, 422)
    assert "at least 20 lines" in answer.json()["detail"]
    answer = await client.post(
        "/v1/qa/trace",
        json={"text": "x = 1\n" * (trace.MAX_TEXT_CHARACTERS // 6 + 1)},
        headers=reviewer,
    )
    assert_problem(answer, 422)
    assert "at most 1000000 characters" in answer.json()["detail"]
    answer = await client.post(
        "/v1/qa/trace", json={"text": short}, headers=bearer(keys["candidate_app"])
    )
    assert_problem(answer, 403)


async def test_a_reviewer_traces_a_leak_on_the_page_and_retires_its_variant(
    client: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    await store_renderings(pool, SERVED)
    # The mission page reads the proofs: a proof as the pipeline stores one.
    proof = msgspec.to_builtins(PROOF)
    await pool.execute("UPDATE missions SET proof = $1", proof)
    await pool.execute("UPDATE mission_variants SET proof = $1", proof)
    instance = await serve(client, keys["candidate_app"], "leaker")
    await sign_in(client, keys["qa_reviewer"])
    form = await client.get("/qa/trace")
    assert form.status_code == 200
    short = await client.post("/qa/trace", data={"text": "x = 1\n", "csrf_token": form_token(form)})
    assert "at least 20 lines" in short.text

    found = await client.post(
        "/qa/trace",
        data={
            "text": reformatted_fragment(longest_file(instance["files"])),
            "csrf_token": form_token(form),
        },
    )
    assert found.status_code == 200
    assert f"<td>#{instance['id']}</td>" in found.text
    assert "<td>leaker</td>" in found.text
    variant_retire = (
        f"/qa/missions/{instance['mission_id']}/variants/{instance['variant_id']}/retire"
    )
    assert f'action="{variant_retire}"' in found.text

    retired = await client.post(
        variant_retire,
        data={"reason": "leaked on a forum", "csrf_token": form_token(found)},
        follow_redirects=False,
    )
    assert retired.status_code == 303
    assert (
        await pool.fetchval(
            "SELECT retire_reason FROM mission_variants WHERE id = $1", int(instance["variant_id"])
        )
        == "leaked on a forum"
    )
    page = await client.get(f"/qa/missions/{instance['mission_id']}")
    assert "no longer serves variant" in page.text
    assert "“leaked on a forum”" in page.text


def index_reads(plan: dict[str, Any], table: str) -> set[str]:
    """How a plan reads `table`: the index of each scan, or the node type when it uses none."""
    found = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", []))
        if node.get("Relation Name") != table:
            continue
        if node["Node Type"] == "Bitmap Heap Scan":
            found |= {child["Index Name"] for child in node["Plans"] if "Index Name" in child}
        else:
            found.add(node.get("Index Name", node["Node Type"]))
    return found


@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
async def test_the_lookup_reads_fingerprints_and_instances_through_their_indexes(
    pool: asyncpg.Pool, plan_mode: str
) -> None:
    mission_id = await add_mission(pool, max_serves=2000)
    variant_id = await pool.fetchval(
        "SELECT id FROM mission_variants WHERE mission_id = $1", mission_id
    )
    await pool.execute(
        """INSERT INTO mission_renderings (variant_id, mission_id, number, files, gold_files,
               test_files, hidden_test_files, renderer, proof, status, max_serves,
               fingerprinted_at)
           SELECT $1, $2, n, '{}', '{}', '{}', '{}', 'renamed', '{}', 'ready', 1, now()
           FROM generate_series(1, 2000) n""",
        variant_id,
        mission_id,
    )
    await pool.execute(
        """INSERT INTO rendering_fingerprints (hash, rendering_id)
           SELECT DISTINCT ((n * 2654435761) % 4611686018427387903), r.id
           FROM generate_series(1, 200000) n
           JOIN (SELECT id, row_number() OVER (ORDER BY id) AS k FROM mission_renderings) r
             ON r.k = 1 + n % 2000"""
    )
    await pool.execute(
        """INSERT INTO mission_instances (mission_id, variant_id, rendering_id, user_id, track,
               domain, language, title, brief, files, serve_number)
           SELECT $1, $2, r.id, 'user-' || r.id, 'backend-engineer', 'python-backend', 'python',
                  't', 'b', '{}', 1
           FROM mission_renderings r WHERE r.variant_id = $2""",
        mission_id,
        variant_id,
    )
    await pool.execute("ANALYZE")
    hashes = [(n * 2654435761) % 4611686018427387903 for n in range(1, 60)]
    rendering_ids = [
        row["id"] for row in await pool.fetch("SELECT id FROM mission_renderings LIMIT 20")
    ]
    async with pool.acquire() as connection:
        await connection.execute(f"SET plan_cache_mode = {plan_mode}")
        lookup = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + trace.queries["renderings_sharing_fingerprints"],
            hashes,
            30,
            trace.MAX_RENDERINGS,
        )
        instances = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + trace.queries["instances_of_renderings"], rendering_ids
        )
        unfingerprinted = await connection.fetchval(
            "EXPLAIN (FORMAT JSON) " + trace.queries["renderings_unfingerprinted"], 200
        )
        await connection.execute("RESET plan_cache_mode")
    plans = {
        "rendering_fingerprints": json.loads(lookup)[0]["Plan"],
        "mission_instances": json.loads(instances)[0]["Plan"],
        "mission_renderings": json.loads(unfingerprinted)[0]["Plan"],
    }
    assert index_reads(plans["rendering_fingerprints"], "rendering_fingerprints") == {
        "rendering_fingerprints_pkey"
    }, plans
    assert index_reads(plans["mission_instances"], "mission_instances") == {
        "mission_instances_by_rendering"
    }, plans
    assert index_reads(plans["mission_renderings"], "mission_renderings") == {
        "mission_renderings_unfingerprinted"
    }, plans
