"""The mission pipeline with the real proof: a claimed job becomes a proven mission in review,
or fails with a reason a person understands; review settles the waiting user's job."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import msgspec
import pytest
import yaml

from core.domains import DomainMap, parse
from generation.offline import OfflineProvider
from generation.pipeline import MissionPipeline
from generation.provider import Provider
from pool import waiting
from qa.proof import Prover
from qa.results import Trust
from tests.support.jobs import enqueue, status_of
from tests.support.pipelines import run_pending, shipped_map
from tests.support.providers import (
    BREAKS_ONE,
    BROKEN_GOLD,
    HARMLESS,
    OFF_BY_ONE,
    PRICES,
    Scripted,
)
from tests.support.proving import require

ROOT = Path(__file__).resolve().parents[3]


def edited_map(**backend: object) -> DomainMap:
    """The shipped map as an operator would edit it: keys added to python-backend's entry."""
    document = yaml.safe_load((ROOT / "domain_map.yaml").read_text(encoding="utf-8"))
    document["domains"]["python-backend"].update(backend)
    return parse(document, "domain_map.yaml, edited")


async def run_job(
    pool: asyncpg.Pool,
    prover: Prover,
    provider: Provider,
    *,
    user: str | None,
    domain: str = "python-backend",
    trust: Trust = "trusted",
    domains: DomainMap | None = None,
) -> asyncpg.Record:
    job = await enqueue(pool, user, domain=domain)
    pipeline = MissionPipeline(
        db=pool,
        provider=provider,
        prover=prover,
        trust=trust,
        domain_map=domains or shipped_map(),
        sabotage_tries=3,
        serve_waiting_user=waiting.serve_waiting_user,
    )
    await run_pending(pool, pipeline)
    row = await pool.fetchrow("SELECT * FROM generation_jobs WHERE id = $1", job)
    assert row is not None
    return row


async def ledger(pool: asyncpg.Pool, job_id: int) -> list[str]:
    rows = await pool.fetch(
        "SELECT purpose, outcome FROM llm_calls WHERE job_id = $1 ORDER BY id", job_id
    )
    return [f"{row['purpose']}:{row['outcome']}" for row in rows]


async def test_a_replenish_job_stores_a_proven_mission_for_review(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    job = await run_job(pool, prover, OfflineProvider(delay_seconds=0), user=None)
    assert (job["status"], job["error"]) == ("completed", None)
    mission = await pool.fetchrow("SELECT * FROM missions WHERE id = $1", job["mission_id"])
    assert mission is not None
    assert mission["qa_status"] == "awaiting_review"
    assert mission["job_id"] == job["id"]
    assert mission["provider"] == "offline"
    assert mission["gold_files"] != mission["sabotaged_files"]
    proof = mission["proof"]
    assert proof["gold"]["passed"] == proof["gold"]["total"] > 0
    last = proof["sabotage_tries"][-1]
    assert last["failed"] + last["errored"] == last["total"]
    assert proof["verdict"].startswith("the planted bug broke all")
    # The hidden tests: stored apart, the gold passes them, and the bug's effect is on record.
    assert mission["hidden_test_files"]
    assert not mission["hidden_test_files"].keys() & mission["test_files"].keys()
    assert proof["hidden_gold"]["passed"] == proof["hidden_gold"]["total"] > 0
    assert proof["hidden_sabotage"]["total"] == proof["hidden_gold"]["total"]
    assert 0 < mission["max_serves"] <= 100
    assert await ledger(pool, job["id"]) == ["generate:ok"] + ["sabotage:ok"] * len(
        proof["sabotage_tries"]
    )
    assert (
        await pool.fetchval("SELECT sum(cost_usd) FROM llm_calls WHERE job_id = $1", job["id"]) == 0
    )


async def test_an_interactive_job_waits_for_review_and_approval_serves_its_user(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    job = await run_job(pool, prover, Scripted(PRICES, [OFF_BY_ONE]), user="ada")
    assert job["status"] == "awaiting_review"
    assert job["finished_at"] is None
    assert (
        await pool.fetchval("SELECT requested_by FROM missions WHERE id = $1", job["mission_id"])
        == "ada"
    )
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute(
            "UPDATE missions SET qa_status = 'approved' WHERE id = $1", job["mission_id"]
        )
        await waiting.after_approval(connection, job["mission_id"])
    settled = await pool.fetchrow(
        "SELECT status, instance_id FROM generation_jobs WHERE id = $1", job["id"]
    )
    assert settled is not None
    assert settled["status"] == "completed"
    instance = await pool.fetchrow(
        "SELECT * FROM mission_instances WHERE id = $1", settled["instance_id"]
    )
    assert instance is not None
    assert (instance["user_id"], instance["mission_id"], instance["serve_number"]) == (
        "ada",
        job["mission_id"],
        1,
    )
    assert instance["files"]["basket.py"] == OFF_BY_ONE.sabotaged_files["basket.py"]


async def test_a_rejection_fails_the_waiting_job_with_the_reason(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    job = await run_job(pool, prover, Scripted(PRICES, [OFF_BY_ONE]), user="bob")
    async with pool.acquire() as connection, connection.transaction():
        await waiting.after_refusal(connection, job["mission_id"], "rejected in review: too easy")
    row = await status_of(pool, job["id"])
    assert (row["status"], row["error"]) == ("failed", "rejected in review: too easy")


async def test_a_domain_reviewed_by_proof_serves_the_waiting_user_at_once(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    job = await run_job(
        pool, prover, Scripted(PRICES, [OFF_BY_ONE]), user="cy", domains=shipped_map(review="proof")
    )
    assert job["status"] == "completed"
    assert job["instance_id"] is not None
    assert (
        await pool.fetchval("SELECT qa_status FROM missions WHERE id = $1", job["mission_id"])
        == "approved"
    )


async def test_a_gold_that_fails_its_own_tests_fails_the_job(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    job = await run_job(pool, prover, Scripted(BROKEN_GOLD, [OFF_BY_ONE]), user=None)
    assert job["status"] == "failed"
    assert job["error"].startswith(
        "the gold solution failed its own tests: gold failed 1 of 2 tests"
    )
    assert await pool.fetchval("SELECT count(*) FROM missions") == 0
    assert await ledger(pool, job["id"]) == ["generate:ok"], "no bug is planted in a broken gold"


async def test_a_gold_that_fails_its_hidden_tests_fails_the_job(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    hidden = {"test_basket_more.py": "from basket import total\n\ndef test_x():\n    assert 0\n"}
    wrong = msgspec.structs.replace(PRICES, hidden_test_files=hidden)
    job = await run_job(pool, prover, Scripted(wrong, [OFF_BY_ONE]), user=None)
    assert job["status"] == "failed"
    assert job["error"].startswith("the gold solution failed its hidden tests: gold failed 1 of 1")
    without = msgspec.structs.replace(PRICES, hidden_test_files={})
    job = await run_job(pool, prover, Scripted(without, [OFF_BY_ONE]), user=None)
    assert (job["status"], job["error"]) == (
        "failed",
        "the mission has no hidden tests, so no fix could be graded",
    )


async def test_a_bug_that_breaks_nothing_is_planted_again_then_the_job_fails(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    job = await run_job(pool, prover, Scripted(PRICES, [HARMLESS]), user=None)
    assert job["status"] == "failed"
    assert "no planted bug passed its proof in 3 tries" in job["error"]
    assert "broke nothing" in job["error"]
    assert await ledger(pool, job["id"]) == ["generate:ok"] + ["sabotage:ok"] * 3, "each try billed"
    assert await pool.fetchval("SELECT count(*) FROM missions") == 0


async def test_a_bug_that_breaks_only_some_tests_is_refused_by_default(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    domains = shipped_map()
    assert domains.domains["python-backend"].sabotage_must_fail == "all", "the default"
    job = await run_job(pool, prover, Scripted(PRICES, [BREAKS_ONE]), user=None, domains=domains)
    assert job["status"] == "failed"
    assert job["error"] == (
        "no planted bug passed its proof in 3 tries; the last: the planted bug broke only 1 of "
        "2 tests (every test must fail); still passing or skipped: test_basket.py::test_one_item"
    )
    assert await ledger(pool, job["id"]) == ["generate:ok"] + ["sabotage:ok"] * 3, "planted again"
    assert await pool.fetchval("SELECT count(*) FROM missions") == 0


async def test_a_domain_that_needs_one_failing_test_accepts_a_bug_that_breaks_only_some(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    domains = edited_map(sabotage_must_fail="at_least_one")
    job = await run_job(pool, prover, Scripted(PRICES, [BREAKS_ONE]), user=None, domains=domains)
    assert (job["status"], job["error"]) == ("completed", None)
    mission = await pool.fetchrow("SELECT * FROM missions WHERE id = $1", job["mission_id"])
    assert mission is not None
    assert mission["sabotaged_files"] == BREAKS_ONE.sabotaged_files
    [only_try] = mission["proof"]["sabotage_tries"]
    assert (only_try["total"], only_try["failed"], only_try["passed"]) == (2, 1, 1)
    assert mission["proof"]["verdict"] == (
        "the planted bug broke 1 of 2 tests (at least one must fail)"
    )
    assert await ledger(pool, job["id"]) == ["generate:ok", "sabotage:ok"], "planted once"


async def test_a_second_identical_mission_is_discarded(pool: asyncpg.Pool, prover: Prover) -> None:
    require(prover, "python", "trusted")
    first = await run_job(pool, prover, Scripted(PRICES, [HARMLESS, OFF_BY_ONE]), user=None)
    second = await run_job(pool, prover, Scripted(PRICES, [OFF_BY_ONE]), user=None)
    assert first["status"] == "completed"
    assert (second["status"], second["error"]) == (
        "failed",
        "made a mission identical to one already in the pool; discarded",
    )
    assert await pool.fetchval("SELECT count(*) FROM missions") == 1


async def test_a_mission_without_code_goes_to_people_unproven(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    job = await run_job(
        pool, prover, OfflineProvider(delay_seconds=0), user=None, domain="marketing-copy"
    )
    assert job["status"] == "completed"
    mission = await pool.fetchrow(
        "SELECT qa_status, proof, test_files FROM missions WHERE id = $1", job["mission_id"]
    )
    assert mission is not None
    assert mission["qa_status"] == "awaiting_review"
    assert mission["proof"] == {
        "gold": None,
        "sabotage_tries": [],
        "verdict": "no code: human review only",
    }
    assert mission["test_files"] == {}


@pytest.mark.parametrize("trust", ["untrusted"])
async def test_untrusted_code_is_refused_where_the_sandbox_is_missing(
    pool: asyncpg.Pool, prover: Prover, trust: Trust
) -> None:
    reason = prover.availability("python", trust)
    job = await run_job(pool, prover, Scripted(PRICES, [OFF_BY_ONE]), user=None, trust=trust)
    if reason is None:
        assert job["status"] == "completed", "the sandbox is here: untrusted code is proven in it"
    else:
        assert job["status"] == "failed"
        assert job["error"] == f"domain python-backend is disabled on this worker: {reason}"
