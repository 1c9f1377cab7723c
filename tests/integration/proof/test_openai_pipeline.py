"""The openai path end to end, through the real SDK against the local stub: a job enqueued over
HTTP becomes a proven mission (untrusted model output, proven in the sandbox), its spend on the
Job matches what the stub reported, a retried request bills nothing new, and every failure mode
ends the job with a clear error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from core.domains import DomainMap, load, parse
from generation import admission
from generation.dispatcher import Dispatcher
from generation.openai import prices
from generation.openai.failures import RetryPolicy
from generation.openai.provider import OpenAIProvider, worst_case_cost_usd
from generation.pipeline import MissionPipeline
from generation.sweeper import Sweeper
from generation.worker import Worker
from pool import waiting
from qa.proof import Prover
from server.auth import Role
from tests.support.http import bearer
from tests.support.jobs import LIMITS, enqueue
from tests.support.openai_stub import GOLD_FILES, USAGE, Behaviour, OpenAIStub, running_stub
from tests.support.proving import require

# Users' generations are enqueued as when a worker can make every domain.
pytestmark = pytest.mark.usefixtures("standing_worker")

ROOT = Path(__file__).resolve().parents[3]
MODEL = "gpt-4o-mini"
MINUTE = timedelta(minutes=1)
BODY = {"user_id": "ada", "track": "backend-engineer"}
# How long a `slow` answer of the stub takes.
STUB_DELAY_SECONDS = 2.0


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with running_stub() as stub:
        yield stub


@pytest.fixture
def timeout_seconds() -> float:
    """The provider's request timeout; a test parametrized with `timeout_seconds` overrides it."""
    return 10


@pytest.fixture
async def provider(stub: OpenAIStub, timeout_seconds: float) -> AsyncIterator[OpenAIProvider]:
    stub.reset()

    async def no_wait(_: float) -> None:
        return None

    provider = OpenAIProvider(
        api_key="sk-test",
        base_url=stub.base_url,
        model=MODEL,
        prices=prices.load(),
        timeout_seconds=timeout_seconds,
        retry=RetryPolicy(max_tries=3, first_delay_seconds=1, sleep=no_wait),
    )
    yield provider
    await provider.close()


async def generate(
    pool: asyncpg.Pool,
    prover: Prover,
    provider: OpenAIProvider,
    domain_map: DomainMap | None = None,
) -> None:
    pipeline = MissionPipeline(
        db=pool,
        provider=provider,
        prover=prover,
        trust="untrusted",
        domain_map=domain_map or load(ROOT / "domain_map.yaml"),
        sabotage_tries=2,
        serve_waiting_user=waiting.serve_waiting_user,
    )
    worker = Worker(pool, pipeline, name="openai-test", capacity=2)
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    await Dispatcher(pool, worker, sweeper, global_cap=2, replenish_cap=2).run_once()
    assert await worker.drain(grace_seconds=120)


async def post_job(client: AsyncTestClient[Litestar], keys: dict[Role, str], key: str) -> Any:
    return await client.post(
        "/v1/jobs",
        json=BODY | {"user_id": key},
        headers=bearer(keys["candidate_app"]) | {"Idempotency-Key": key},
    )


def priced(*schemas: str) -> float:
    price = prices.load().for_model(MODEL)
    return float(sum((price.cost(*USAGE[schema]) for schema in schemas), Decimal(0)))


async def test_a_job_becomes_a_proven_mission_and_its_spend_matches_the_stub(
    client: AsyncTestClient[Litestar],
    keys: dict[Role, str],
    pool: asyncpg.Pool,
    prover: Prover,
    provider: OpenAIProvider,
    stub: OpenAIStub,
) -> None:
    require(prover, "python", "untrusted")
    created = await post_job(client, keys, "first")
    assert created.status_code == 202
    await generate(pool, prover, provider)

    job = (
        await client.get(
            f"/v1/jobs/{created.json()['job']['id']}", headers=bearer(keys["candidate_app"])
        )
    ).json()
    assert job["status"] == "awaiting_review", job["error"]
    mission = await pool.fetchrow("SELECT * FROM missions WHERE id = $1", int(job["mission_id"]))
    assert mission is not None
    assert (mission["provider"], mission["prompt_version"]) == ("openai", provider.prompt_version)
    assert mission["proof"]["gold"]["trust"] == "untrusted"
    assert mission["proof"]["verdict"] == "the planted bug broke all 3 tests"
    reported_in, reported_out = stub.reported_usage()
    assert len(stub.received) == 2
    assert job["spend"] == {
        "llm_calls": 2,
        "input_tokens": reported_in,
        "output_tokens": reported_out,
        "cost_usd": pytest.approx(priced("mission", "sabotage")),
        "resumed_calls": 0,
        "saved_usd": 0.0,
    }

    again = await post_job(client, keys, "first")
    assert again.status_code == 200
    assert again.json()["job"]["id"] == job["id"]
    await generate(pool, prover, provider)
    assert len(stub.received) == 2, "the retried request billed nothing new"
    assert await pool.fetchval("SELECT count(*) FROM llm_calls") == 2


@pytest.mark.parametrize(
    ("behaviour", "error", "outcome", "timeout_seconds"),
    [
        ("server_error", "answered 500", "failed", 10),
        ("malformed", "malformed", "malformed", 10),
        ("refusal", "refused", "refused", 10),
        ("truncated", "cut off", "malformed", 10),
        ("quota", "quota", "unbilled", 10),
        # The stub answers after STUB_DELAY_SECONDS, long after the provider stopped waiting.
        ("slow", "did not answer within 0.5 s", "failed", 0.5),
    ],
)
async def test_every_failure_mode_ends_the_job_with_a_clear_error(
    client: AsyncTestClient[Litestar],
    keys: dict[Role, str],
    pool: asyncpg.Pool,
    prover: Prover,
    provider: OpenAIProvider,
    stub: OpenAIStub,
    behaviour: Behaviour,
    error: str,
    outcome: str,
) -> None:
    require(prover, "python", "untrusted")
    stub.delay_seconds = STUB_DELAY_SECONDS
    stub.plan(behaviour)
    created = await post_job(client, keys, behaviour)
    await generate(pool, prover, provider)
    job = (
        await client.get(
            f"/v1/jobs/{created.json()['job']['id']}", headers=bearer(keys["candidate_app"])
        )
    ).json()
    assert job["status"] == "failed"
    assert error in job["error"].lower(), job["error"]
    calls = await pool.fetch("SELECT outcome, error FROM llm_calls ORDER BY id")
    assert [call["outcome"] for call in calls] == [outcome]
    assert calls[0]["error"].startswith(job["error"])
    assert len(stub.received) == 1, "not tried again"
    assert job["spend"]["llm_calls"] == 1
    # An answer that came back is paid at the usage it reports; a 500 or a timeout may have
    # billed, with nothing to say how much, so it is booked at the call's ceiling; a refusal
    # for an exhausted quota billed nothing.
    costs = {
        "malformed": priced("mission"),
        "refused": priced("mission"),
        "failed": float(worst_case_cost_usd(prices.load().for_model(MODEL), 1)),
        "unbilled": 0,
    }
    assert job["spend"]["cost_usd"] == pytest.approx(costs[outcome])
    assert ("booked at its ceiling" in calls[0]["error"]) == (outcome == "failed"), calls
    assert await pool.fetchval("SELECT count(*) FROM missions") == 0


# Another bug than the stub's own: every count doubled, which every test sees.
DOUBLED = {
    "word_count.py": GOLD_FILES["word_count.py"].replace(
        "counts.get(word, 0) + 1", "counts.get(word, 0) + 2"
    )
}


def variant_map(source: str) -> DomainMap:
    """python-backend alone, approved by proof: 10 serves a mission, 5 a bug."""
    python = {
        "kind": "technical",
        "language": "python",
        "target": 0,
        "retire_after": 10,
        "retire_jitter": False,
        "review": "proof",
        "variant_source": source,
    }
    return parse(
        {"tracks": {"backend-engineer": ["python-backend"]}, "domains": {"python-backend": python}},
        "domain_map.yaml",
    )


@pytest.mark.parametrize("source", ["model", "saboteur"])
async def test_a_variant_job_plants_its_bug_where_the_domain_says(
    pool: asyncpg.Pool,
    prover: Prover,
    provider: OpenAIProvider,
    stub: OpenAIStub,
    source: str,
) -> None:
    require(prover, "python", "untrusted")
    domain_map = variant_map(source)
    await enqueue(pool, None)
    await generate(pool, prover, provider, domain_map)
    mission = await pool.fetchval("SELECT id FROM missions WHERE qa_status = 'approved'")
    assert mission is not None
    mission_calls = len(stub.received)
    stub.answers["sabotage"] = {
        "sabotaged_files": [{"path": p, "content": c} for p, c in DOUBLED.items()],
        "bug_summary": "word_count.py: every word counts twice.",
        "grader_hint": "Look at the increment.",
    }
    async with pool.acquire() as connection, connection.transaction():
        job = await admission.enqueue(
            connection,
            lane="replenish",
            user_id=None,
            track=None,
            domain="python-backend",
            variant_of=mission,
            limits=LIMITS,
        )
    await generate(pool, prover, provider, domain_map)

    ended = await pool.fetchrow("SELECT status, error FROM generation_jobs WHERE id = $1", job)
    assert ended is not None
    assert (ended["status"], ended["error"]) == ("completed", None)
    variant = await pool.fetchrow(
        "SELECT * FROM mission_variants WHERE job_id = $1 AND mission_id = $2", job, mission
    )
    assert variant is not None
    assert variant["proof"]["gold"]["trust"] == "untrusted"
    calls = await pool.fetch("SELECT purpose, cost_usd FROM llm_calls WHERE job_id = $1", job)
    if source == "model":
        # One sabotage call through the real SDK, on the ledger at the price of what it used.
        assert [received.schema_name for received in stub.received[mission_calls:]] == ["sabotage"]
        [call] = calls
        assert call["purpose"] == "sabotage"
        assert float(call["cost_usd"]) == pytest.approx(priced("sabotage"))
        assert (variant["provider"], variant["sabotaged_files"]) == ("openai", DOUBLED)
    else:
        # The procedural saboteur: no model call, nothing on the ledger.
        assert len(stub.received) == mission_calls
        assert calls == []
        assert variant["provider"] == "saboteur"
        assert variant["sabotaged_files"] != DOUBLED
