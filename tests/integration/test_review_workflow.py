"""Missions stored and reviewed: approval by proof or by a person, duplicates discarded, every
transition conditional on the state it leaves, with who, when and why recorded."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import pytest

from core import domains
from qa import review
from qa.missions import NO_CODE_VERDICT, PROOF_REVIEWER, store
from tests.support.proven_missions import PROOF, store_mission, with_review
from tests.support.server import ROOT

DOMAINS = domains.load(ROOT / "domain_map.yaml").domains
PYTHON = DOMAINS["python-backend"]


async def row(pool: asyncpg.Pool, mission_id: int) -> dict[str, Any]:
    record = await pool.fetchrow("SELECT * FROM missions WHERE id = $1", mission_id)
    assert record is not None
    return dict(record)


async def database_now(pool: asyncpg.Pool) -> datetime:
    moment: datetime = await pool.fetchval("SELECT clock_timestamp()")
    return moment


async def test_a_mission_waits_for_a_reviewer_unless_its_domain_trusts_a_passed_proof(
    pool: asyncpg.Pool,
) -> None:
    human = await row(pool, await store_mission(pool, PYTHON, proven=True))
    assert (human["qa_status"], human["reviewed_by"], human["reviewed_at"]) == (
        "awaiting_review",
        None,
        None,
    )

    by_proof = with_review(PYTHON, "proof")
    approved = await row(pool, await store_mission(pool, by_proof, proven=True))
    assert approved["qa_status"] == "approved"
    assert approved["reviewed_by"] == PROOF_REVIEWER
    assert approved["review_note"] == PROOF.verdict
    assert approved["reviewed_at"] is not None

    unproven = await row(pool, await store_mission(pool, by_proof, proven=False))
    assert (unproven["qa_status"], unproven["reviewed_by"]) == ("awaiting_review", None)


async def test_the_same_mission_is_stored_once(pool: asyncpg.Pool) -> None:
    mission: dict[str, Any] = {
        "title": "Once",
        "brief": "b",
        "gold_files": {"a.py": "x = 1\n", "b.py": "y = 2\n"},
        "test_files": {"test_a.py": "def test(): pass\n"},
        "hidden_test_files": {"test_hidden_a.py": "def test(): pass\n"},
        "sabotaged_files": {"a.py": "x = 2\n", "b.py": "y = 2\n"},
        "bug_summary": "s",
        "grader_hint": "",
        "proof": PROOF,
        "provider": "offline",
        "prompt_version": None,
        "job_id": None,
        "requested_by": None,
        "max_serves": 100,
        "proven": True,
    }
    first = await store(pool, domain=PYTHON, **mission)
    assert first is not None
    # Key order and the title do not make a new mission: only the domain and the files count.
    reordered = mission | {
        "title": "Twice",
        "gold_files": {"b.py": "y = 2\n", "a.py": "x = 1\n"},
    }
    assert await store(pool, domain=PYTHON, **reordered) is None
    other_domain = await store(pool, domain=DOMAINS["sql-data"], **mission)
    assert other_domain not in (None, first)
    assert await pool.fetchval("SELECT count(*) FROM missions") == 2


async def test_a_mission_reads_back_in_full(pool: asyncpg.Pool) -> None:
    mission_id = await store_mission(pool, PYTHON, requested_by="user-7")
    mission = await review.get(pool, mission_id)
    assert mission.id == mission_id
    assert (mission.domain, mission.kind, mission.language) == (
        "python-backend",
        "technical",
        "python",
    )
    assert mission.requested_by == "user-7"
    assert mission.max_serves == PYTHON.retire_after
    assert mission.proof == PROOF
    assert mission.verdict == PROOF.verdict
    assert set(mission.diff) == {"pricing.py"}, "only the changed file has a diff"
    assert "-    return round(subtotal * (1 - discount), 2)" in mission.diff["pricing.py"]
    assert "+    return round(subtotal * (1 + discount), 2)" in mission.diff["pricing.py"]
    assert mission.created_at.utcoffset() == timedelta(0)


async def test_a_mission_without_code_has_no_runs(pool: asyncpg.Pool) -> None:
    copy = DOMAINS["marketing-copy"]
    mission = await review.get(pool, await store_mission(pool, copy))
    assert (mission.kind, mission.language) == ("non_technical", "none")
    assert mission.proof.gold is None
    assert mission.proof.sabotage_tries == []
    assert mission.verdict == NO_CODE_VERDICT
    assert mission.qa_status == "awaiting_review"


async def test_approve_records_who_when_and_why_once(pool: asyncpg.Pool) -> None:
    mission_id = await store_mission(pool, PYTHON)
    before = await database_now(pool)
    async with pool.acquire() as connection:
        approved = await review.approve(
            connection, mission_id, reviewer="ada", note="  clear bug  "
        )
    after = await database_now(pool)
    assert (approved.qa_status, approved.reviewed_by, approved.review_note) == (
        "approved",
        "ada",
        "clear bug",
    )
    assert approved.reviewed_at is not None
    assert before <= approved.reviewed_at <= after

    stored = await row(pool, mission_id)
    async with pool.acquire() as connection:
        with pytest.raises(review.MissionStateConflict, match="is approved by ada"):
            await review.approve(connection, mission_id, reviewer="bob")
        with pytest.raises(review.MissionStateConflict, match="is approved by ada"):
            await review.reject(connection, mission_id, reviewer="bob", reason="no")
    assert await row(pool, mission_id) == stored, "a refused transition changes nothing"


async def test_reject_records_the_reason_and_forbids_approval(pool: asyncpg.Pool) -> None:
    mission_id = await store_mission(pool, PYTHON)
    async with pool.acquire() as connection:
        rejected = await review.reject(connection, mission_id, reviewer="bob", reason="too easy")
        assert (rejected.qa_status, rejected.reviewed_by, rejected.review_note) == (
            "rejected",
            "bob",
            "too easy",
        )
        stored = await row(pool, mission_id)
        with pytest.raises(review.MissionStateConflict, match="only a mission awaiting review"):
            await review.approve(connection, mission_id, reviewer="ada")
    assert await row(pool, mission_id) == stored


async def test_retire_once_from_any_state(pool: asyncpg.Pool) -> None:
    for status in ("awaiting_review", "approved", "rejected"):
        mission_id = await store_mission(pool, PYTHON)
        async with pool.acquire() as connection:
            if status == "approved":
                await review.approve(connection, mission_id, reviewer="ada")
            if status == "rejected":
                await review.reject(connection, mission_id, reviewer="ada", reason="no")
            retired = await review.retire(connection, mission_id, reviewer="cy", reason="stale")
            assert retired.qa_status == status, "retiring keeps the review verdict"
            assert (retired.retired_by, retired.retire_reason) == ("cy", "stale")
            assert retired.retired_at is not None
            stored = await row(pool, mission_id)
            with pytest.raises(review.MissionStateConflict, match="already retired by cy"):
                await review.retire(connection, mission_id, reviewer="dee", reason="again")
        assert await row(pool, mission_id) == stored


async def test_a_retired_mission_cannot_be_approved(pool: asyncpg.Pool) -> None:
    mission_id = await store_mission(pool, PYTHON)
    async with pool.acquire() as connection:
        await review.retire(connection, mission_id, reviewer="cy", reason="duplicate idea")
        with pytest.raises(review.MissionStateConflict, match=r"retired \(duplicate idea\)"):
            await review.approve(connection, mission_id, reviewer="ada")
        rejected = await review.reject(connection, mission_id, reviewer="ada", reason="duplicate")
    assert rejected.qa_status == "rejected"


async def decide(pool: asyncpg.Pool, mission_id: int, *, approve: bool) -> str:
    async with pool.acquire() as connection, connection.transaction():
        try:
            if approve:
                await review.approve(connection, mission_id, reviewer="ada")
            else:
                await review.reject(connection, mission_id, reviewer="bob", reason="no")
        except review.MissionStateConflict:
            return "lost"
        return "won"


async def test_two_reviewers_at_once_one_wins(pool: asyncpg.Pool) -> None:
    for _ in range(5):
        mission_id = await store_mission(pool, PYTHON)
        outcomes = await asyncio.gather(
            decide(pool, mission_id, approve=True), decide(pool, mission_id, approve=False)
        )
        assert sorted(outcomes) == ["lost", "won"]
        winner = await row(pool, mission_id)
        assert winner["reviewed_by"] == ("ada" if outcomes[0] == "won" else "bob")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c, m: review.reject(c, m, reviewer="r", reason=""), "reason is empty"),
        (lambda c, m: review.reject(c, m, reviewer="r", reason="  \n "), "reason is empty"),
        (lambda c, m: review.retire(c, m, reviewer="r", reason=""), "reason is empty"),
        (lambda c, m: review.approve(c, m, reviewer="r", note="n" * 2001), "the limit is 2000"),
        (lambda c, m: review.retire(c, m, reviewer="r", reason="r" * 2001), "the limit is 2000"),
        (
            lambda c, m: review.reject(c, m, reviewer="r", reason="r" * 2000 + " "),
            "2001 characters long; the limit is 2000",
        ),
    ],
    ids=[
        "empty reason",
        "blank reason",
        "empty retire reason",
        "long note",
        "long reason",
        "long with its white space",
    ],
)
async def test_bad_notes_and_reasons_change_nothing(
    pool: asyncpg.Pool, call: Any, message: str
) -> None:
    mission_id = await store_mission(pool, PYTHON)
    stored = await row(pool, mission_id)
    async with pool.acquire() as connection:
        with pytest.raises(review.InvalidReview, match=message):
            await call(connection, mission_id)
    assert await row(pool, mission_id) == stored


# Ids that are not decimal numbers are refused at the HTTP edge (test_http_review).
@pytest.mark.parametrize("mission_id", [999999, 0, -1])
async def test_unknown_missions_are_not_found(pool: asyncpg.Pool, mission_id: int) -> None:
    with pytest.raises(review.MissionNotFound):
        await review.get(pool, mission_id)
    async with pool.acquire() as connection:
        with pytest.raises(review.MissionNotFound):
            await review.approve(connection, mission_id, reviewer="ada")
        with pytest.raises(review.MissionNotFound):
            await review.retire(connection, mission_id, reviewer="ada", reason="x")


async def test_the_queue_lists_waiting_users_first_then_the_oldest(pool: asyncpg.Pool) -> None:
    oldest = await store_mission(pool, PYTHON)
    sql = await store_mission(pool, DOMAINS["sql-data"])
    asked = await store_mission(pool, PYTHON, requested_by="user-1")
    newest = await store_mission(pool, PYTHON)
    asked_later = await store_mission(pool, DOMAINS["sql-data"], requested_by="user-2")
    approved = await store_mission(pool, with_review(PYTHON, "proof"))

    def ids(missions: list[Any]) -> list[int]:
        return [mission.id for mission in missions]

    assert ids(await review.list_missions(pool)) == [asked, asked_later, oldest, sql, newest]
    assert ids(await review.list_missions(pool, domain="sql-data")) == [asked_later, sql]
    assert ids(await review.list_missions(pool, status="approved")) == [approved]
    assert await review.list_missions(pool, status="rejected") == []
    summary = (await review.list_missions(pool, domain="python-backend"))[0]
    assert (summary.requested_by, summary.verdict) == ("user-1", PROOF.verdict)
    with pytest.raises(review.InvalidReview, match="status must be one of awaiting_review"):
        await review.list_missions(pool, status="retired")
