"""The review routes over HTTP: the contract, role checks, bad input that changes nothing, and
the interactive jobs that wait on a review: an approval serves their user, a rejection (or a
retirement before approval) fails them with the reason."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from core import domains
from generation.offline import OfflineProvider
from generation.pipeline import MissionPipeline
from pool import waiting
from server.auth import Role
from tests.support.http import assert_problem, bearer
from tests.support.pipelines import run_pending
from tests.support.proven_missions import PROOF, store_mission
from tests.support.server import ROOT

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

Client = AsyncTestClient[Litestar]
DOMAINS = domains.load(ROOT / "domain_map.yaml").domains
PYTHON = DOMAINS["python-backend"]


async def snapshot(pool: asyncpg.Pool) -> list[dict[str, Any]]:
    return [dict(row) for row in await pool.fetch("SELECT * FROM missions ORDER BY id")]


async def test_list_and_read_a_mission(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    pooled = await store_mission(pool, PYTHON)
    asked = await store_mission(pool, DOMAINS["sql-data"], requested_by="user-9")
    headers = bearer(keys["qa_reviewer"])

    listed = await client.get("/v1/qa/missions?status=awaiting_review", headers=headers)
    assert listed.status_code == 200, listed.text
    missions = listed.json()["missions"]
    assert [mission["id"] for mission in missions] == [str(asked), str(pooled)]
    assert missions[0]["requested_by"] == "user-9"
    assert missions[0]["verdict"] == PROOF.verdict
    assert missions[0]["created_at"].endswith("Z")
    filtered = await client.get("/v1/qa/missions?domain=python-backend", headers=headers)
    assert [mission["id"] for mission in filtered.json()["missions"]] == [str(pooled)]

    read = await client.get(f"/v1/qa/missions/{pooled}", headers=headers)
    assert read.status_code == 200, read.text
    mission = read.json()
    assert mission["id"] == str(pooled)
    assert mission["qa_status"] == "awaiting_review"
    assert (mission["serve_count"], mission["max_serves"], mission["retired_at"]) == (0, 100, None)
    assert (
        set(mission["gold_files"])
        == set(mission["sabotaged_files"])
        == {"pricing.py", "helpers.py"}
    )
    assert set(mission["test_files"]) == {"test_pricing.py"}
    assert "+    return round(subtotal * (1 + discount), 2)" in mission["diff"]["pricing.py"]
    assert mission["bug_summary"] == "total() adds the discount instead of subtracting it."
    assert mission["grader_hint"] == "The fix is one sign in pricing.py."
    gold = mission["proof"]["gold"]
    assert {"command", "passed", "failed", "total", "duration_s", "log_excerpt"} <= set(gold)
    assert (gold["passed"], gold["failed"], gold["total"]) == (2, 0, 2)
    assert [run["failed"] for run in mission["proof"]["sabotage_tries"]] == [1]
    assert mission["proof"]["verdict"] == PROOF.verdict


async def test_approve_reject_and_retire_over_http(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    reviewer = bearer(keys["qa_reviewer"])
    approved_id = await store_mission(pool, PYTHON)
    approved = await client.post(
        f"/v1/qa/missions/{approved_id}/approve", json={"note": "good one"}, headers=reviewer
    )
    assert approved.status_code == 200, approved.text
    body = approved.json()
    assert (body["qa_status"], body["reviewed_by"], body["review_note"]) == (
        "approved",
        "test-qa_reviewer",
        "good one",
    )
    assert body["reviewed_at"].endswith("Z")
    again = await client.post(f"/v1/qa/missions/{approved_id}/approve", json={}, headers=reviewer)
    assert_problem(again, 409, "is approved by test-qa_reviewer", "awaiting review")
    late = await client.post(
        f"/v1/qa/missions/{approved_id}/reject", json={"reason": "no"}, headers=reviewer
    )
    assert_problem(late, 409, "only a mission awaiting review can be rejected")

    rejected_id = await store_mission(pool, PYTHON)
    rejected = await client.post(
        f"/v1/qa/missions/{rejected_id}/reject",
        json={"reason": "tests leak the fix"},
        headers=reviewer,
    )
    assert rejected.status_code == 200, rejected.text
    assert (rejected.json()["qa_status"], rejected.json()["review_note"]) == (
        "rejected",
        "tests leak the fix",
    )

    admin = bearer(keys["admin"])
    retired = await client.post(
        f"/v1/qa/missions/{approved_id}/retire", json={"reason": "seen online"}, headers=admin
    )
    assert retired.status_code == 200, retired.text
    assert retired.json()["retired_at"].endswith("Z")
    assert (retired.json()["retired_by"], retired.json()["retire_reason"]) == (
        "test-admin",
        "seen online",
    )
    twice = await client.post(
        f"/v1/qa/missions/{approved_id}/retire", json={"reason": "again"}, headers=reviewer
    )
    assert_problem(twice, 409, "already retired by test-admin")


async def test_roles(client: Client, keys: dict[Role, str], pool: asyncpg.Pool) -> None:
    mission_id = await store_mission(pool, PYTHON)
    before = await snapshot(pool)
    candidate_app = bearer(keys["candidate_app"])
    for method, path, body in [
        ("GET", "/v1/qa/missions", None),
        ("GET", f"/v1/qa/missions/{mission_id}", None),
        ("POST", f"/v1/qa/missions/{mission_id}/approve", {}),
        ("POST", f"/v1/qa/missions/{mission_id}/reject", {"reason": "r"}),
        ("POST", f"/v1/qa/missions/{mission_id}/retire", {"reason": "r"}),
    ]:
        response = await client.request(method, path, json=body, headers=candidate_app)
        assert_problem(response, 403, "'qa_reviewer'", "'candidate_app'")
        assert_problem(await client.request(method, path, json=body), 401, "Bearer")
        unknown = await client.request(method, path, json=body, headers=bearer("wp_unknown"))
        assert_problem(unknown, 401, "not known")
    assert await snapshot(pool) == before

    reviewer_serves = await client.post(
        "/v1/jobs",
        json={"user_id": "u-1", "track": "backend-engineer"},
        headers=bearer(keys["qa_reviewer"]) | {"Idempotency-Key": "k"},
    )
    assert_problem(reviewer_serves, 403, "'candidate_app'", "'qa_reviewer'")
    assert await pool.fetchval("SELECT count(*) FROM generation_jobs") == 0

    admin = await client.get("/v1/qa/missions", headers=bearer(keys["admin"]))
    assert admin.status_code == 200


BAD_REQUESTS: list[tuple[str, str, str, Any, int, str]] = [
    ("reject, empty reason", "POST", "{id}/reject", {"reason": ""}, 422, "reason is empty"),
    ("reject, blank reason", "POST", "{id}/reject", {"reason": "  "}, 422, "reason is empty"),
    ("retire, empty reason", "POST", "{id}/retire", {"reason": ""}, 422, "reason is empty"),
    ("reject, no reason", "POST", "{id}/reject", {}, 400, "reason"),
    ("retire, no body", "POST", "{id}/retire", None, 400, "could not be read"),
    ("approve, long note", "POST", "{id}/approve", {"note": "n" * 2001}, 422, "limit is 2000"),
    ("retire, long reason", "POST", "{id}/retire", {"reason": "r" * 2001}, 422, "limit is 2000"),
    ("reject, NUL in reason", "POST", "{id}/reject", {"reason": "r\x00"}, 422, "NUL character"),
    ("approve, NUL in note", "POST", "{id}/approve", {"note": "\x00"}, 422, "NUL character"),
    ("approve, note not text", "POST", "{id}/approve", {"note": 5}, 400, "note"),
    ("approve, unknown field", "POST", "{id}/approve", {"verdict": "ok"}, 400, "verdict"),
    ("approve, unknown id", "POST", "999999/approve", {}, 404, "no mission '999999'"),
    ("approve, word id", "POST", "abc/approve", {}, 404, "no mission 'abc'"),
    ("retire, negative id", "POST", "-1/retire", {"reason": "r"}, 404, "no mission"),
    ("read, word id", "GET", "abc", None, 404, "no mission 'abc'"),
    ("read, huge id", "GET", "9" * 30, None, 404, "no mission"),
    ("read, superscript id", "GET", "²", None, 404, "no mission"),
    ("list, unknown status", "GET", "?status=retired", None, 422, "status must be one of"),
    ("list, unknown domain", "GET", "?domain=python", None, 422, "known domains: javascript"),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "detail"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
async def test_bad_input_gets_a_problem_and_changes_nothing(
    client: Client,
    keys: dict[Role, str],
    pool: asyncpg.Pool,
    method: str,
    path: str,
    body: Any,
    status: int,
    detail: str,
) -> None:
    mission_id = await store_mission(pool, PYTHON)
    before = await snapshot(pool)
    url = "/v1/qa/missions" + ("" if path.startswith("?") else "/") + path.format(id=mission_id)
    response = await client.request(method, url, json=body, headers=bearer(keys["qa_reviewer"]))
    assert_problem(response, status, detail)
    assert await snapshot(pool) == before


async def test_the_routes_are_in_the_published_contract(client: Client) -> None:
    paths = set((await client.get("/schema/openapi.json")).json()["paths"])
    assert {
        "/v1/qa/missions",
        "/v1/qa/missions/{mission_id}",
        "/v1/qa/missions/{mission_id}/approve",
        "/v1/qa/missions/{mission_id}/reject",
        "/v1/qa/missions/{mission_id}/retire",
    } <= paths
    assert not any(path.startswith("/qa") for path in paths), "the browser UI is not API"


async def waiting_job(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, user_id: str
) -> dict[str, Any]:
    """An interactive job of `user_id`, enqueued over HTTP and run through the real pipeline
    (offline provider; marketing copy has no code, so no proof to run), which leaves the job
    and its mission awaiting review. Returns the job as GET /v1/jobs/{id} shows it."""
    app = bearer(keys["candidate_app"])
    created = await client.post(
        "/v1/jobs",
        json={"user_id": user_id, "track": "marketing-manager"},
        headers=app | {"Idempotency-Key": f"wait-{user_id}"},
    )
    assert created.status_code == 202, created.text
    job_id = created.json()["job"]["id"]
    pipeline = MissionPipeline(
        db=pool,
        provider=OfflineProvider(delay_seconds=0),
        prover=None,
        trust="trusted",
        domain_map=domains.load(ROOT / "domain_map.yaml"),
        sabotage_tries=1,
        serve_waiting_user=waiting.serve_waiting_user,
    )
    claimed = await run_pending(pool, pipeline)
    assert [str(job.id) for job in claimed] == [job_id]
    job = await read_job(client, keys, job_id)
    assert (job["status"], job["user_id"], job["error"]) == ("awaiting_review", user_id, None)
    assert (job["instance_id"], job["finished_at"]) == (None, None)
    mission = await client.get(
        f"/v1/qa/missions/{job['mission_id']}", headers=bearer(keys["qa_reviewer"])
    )
    assert (mission.json()["qa_status"], mission.json()["requested_by"]) == (
        "awaiting_review",
        user_id,
    )
    return job


async def read_job(client: Client, keys: dict[Role, str], job_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/jobs/{job_id}", headers=bearer(keys["candidate_app"]))
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    return job


async def decide(
    client: Client, keys: dict[Role, str], mission_id: str, decision: str, **body: str
) -> dict[str, Any]:
    """A reviewer's decision on a mission, which must be accepted; the mission after it."""
    answer = await client.post(
        f"/v1/qa/missions/{mission_id}/{decision}", json=body, headers=bearer(keys["qa_reviewer"])
    )
    assert answer.status_code == 200, answer.text
    mission: dict[str, Any] = answer.json()
    return mission


async def test_approval_over_http_serves_the_waiting_user(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    reviewer = bearer(keys["qa_reviewer"])
    job = await waiting_job(client, keys, pool, "ada")
    other = await waiting_job(client, keys, pool, "bea")
    mission = (await client.get(f"/v1/qa/missions/{job['mission_id']}", headers=reviewer)).json()

    approved = await decide(client, keys, job["mission_id"], "approve")
    assert approved["qa_status"] == "approved"

    done = await read_job(client, keys, job["id"])
    assert (done["status"], done["error"], done["mission_id"]) == (
        "completed",
        None,
        job["mission_id"],
    )
    assert done["instance_id"] is not None
    assert done["finished_at"].endswith("Z")
    read = await client.get(
        f"/v1/instances/{done['instance_id']}", headers=bearer(keys["candidate_app"])
    )
    assert read.status_code == 200, read.text
    instance = read.json()
    assert (instance["id"], instance["user_id"], instance["mission_id"]) == (
        done["instance_id"],
        "ada",
        job["mission_id"],
    )
    assert (instance["track"], instance["domain"], instance["serve_number"]) == (
        "marketing-manager",
        "marketing-copy",
        1,
    )
    # The candidate sees the sabotaged copy, never the gold or what was planted.
    assert not {"gold_files", "bug_summary", "grader_hint", "proof"} & set(instance)
    assert instance["files"] == mission["sabotaged_files"] | mission["test_files"]
    assert instance["files"] != mission["gold_files"]
    assert mission["bug_summary"]
    assert not any(mission["bug_summary"] in text for text in instance["files"].values())
    assert (await read_job(client, keys, other["id"])) == other, "another mission's job waits on"
    after = (await client.get(f"/v1/qa/missions/{job['mission_id']}", headers=reviewer)).json()
    assert after["serve_count"] == 1


async def test_rejection_over_http_fails_the_waiting_job_with_the_reason(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    job = await waiting_job(client, keys, pool, "bob")
    other = await waiting_job(client, keys, pool, "bea")
    await decide(
        client, keys, job["mission_id"], "reject", reason="the flaw is spelled out in the brief"
    )

    failed = await read_job(client, keys, job["id"])
    assert (failed["status"], failed["error"], failed["instance_id"]) == (
        "failed",
        "the mission was rejected in review: the flaw is spelled out in the brief",
        None,
    )
    assert failed["finished_at"].endswith("Z")
    served = await client.get("/v1/users/bob/instances", headers=bearer(keys["candidate_app"]))
    assert served.json() == {"instances": []}
    assert (await read_job(client, keys, other["id"])) == other, "another mission's job waits on"


async def test_retirement_fails_only_a_job_still_waiting_for_review(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    served = await waiting_job(client, keys, pool, "cy")
    waits = await waiting_job(client, keys, pool, "dee")
    await decide(client, keys, served["mission_id"], "approve")
    completed = await read_job(client, keys, served["id"])
    assert completed["status"] == "completed"

    # An approved mission retired: its user's job was settled at approval and stays as it was.
    await decide(client, keys, served["mission_id"], "retire", reason="seen online")
    assert await read_job(client, keys, served["id"]) == completed
    assert await read_job(client, keys, waits["id"]) == waits
    instance = await client.get(
        f"/v1/instances/{completed['instance_id']}", headers=bearer(keys["candidate_app"])
    )
    assert (instance.status_code, instance.json()["user_id"]) == (200, "cy")

    # A mission retired before approval will never be served: its waiting job fails.
    await decide(client, keys, waits["mission_id"], "retire", reason="a duplicate of another")
    failed = await read_job(client, keys, waits["id"])
    assert (failed["status"], failed["error"], failed["instance_id"]) == (
        "failed",
        "the mission was retired before approval: a duplicate of another",
        None,
    )
