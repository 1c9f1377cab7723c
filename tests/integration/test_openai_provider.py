"""The openai provider through the real SDK, against a local OpenAI-compatible stub server.

Every call is a ledger row in the test database; the stub records every request it received,
so these tests count the paid calls and compare the ledger with what the stub reported.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import asyncpg
import pytest

from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import JobLost, Ledger
from generation.openai import prices
from generation.openai.failures import RetryPolicy
from generation.openai.provider import OpenAIProvider, worst_case_cost_usd
from generation.provider import ProviderError
from tests.support.openai_stub import (
    ANSWERS,
    DOMAIN,
    GOLD_FILES,
    MISSION,
    MODEL,
    SABOTAGED_FILES,
    TEST_FILES,
    USAGE,
    Behaviour,
    OpenAIStub,
    closed_port_url,
    running_stub,
)

PRICE = prices.load().for_model(MODEL)


@dataclass
class Harness:
    """A job generating under attempt 1, the stub, and a provider pointed at the stub."""

    stub: OpenAIStub
    pool: asyncpg.Pool
    ledger: Ledger
    # The backoff waits the provider asked for; tests do not really wait them.
    waits: list[float] = field(default_factory=list)
    provider: OpenAIProvider | None = None

    async def use_provider(
        self, base_url: str | None = None, *, timeout_seconds: float = 10, max_tries: int = 4
    ) -> OpenAIProvider:
        async def sleep(seconds: float) -> None:
            self.waits.append(seconds)

        await self.close()
        self.provider = OpenAIProvider(
            api_key="sk-test",
            base_url=base_url or self.stub.base_url,
            model=MODEL,
            prices=prices.load(),
            timeout_seconds=timeout_seconds,
            retry=RetryPolicy(max_tries=max_tries, first_delay_seconds=2, sleep=sleep),
        )
        return self.provider

    async def close(self) -> None:
        if self.provider is not None:
            await self.provider.close()

    async def write_mission(self, seed: int = 1) -> MissionDraft:
        assert self.provider is not None
        return await self.provider.write_mission(DOMAIN, seed=seed, ledger=self.ledger)

    async def plant_bug(
        self, mission: MissionDraft = MISSION, try_number: int = 1
    ) -> SabotageDraft:
        assert self.provider is not None
        return await self.provider.plant_bug(
            DOMAIN, mission, seed=1, try_number=try_number, ledger=self.ledger
        )

    async def rows(self) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            """
            SELECT purpose, provider, model, attempt, outcome, input_tokens, output_tokens,
                   cost_usd, error, orphaned, finished_at IS NOT NULL AS finished
            FROM llm_calls WHERE job_id = $1 ORDER BY id
            """,
            self.ledger.job_id,
        )
        return [dict(row) for row in rows]

    async def outcomes(self) -> list[str]:
        return [row["outcome"] for row in await self.rows()]


@pytest.fixture(scope="module")
def stub_server() -> Iterator[OpenAIStub]:
    with running_stub() as stub:
        yield stub


@pytest.fixture
async def harness(stub_server: OpenAIStub, pool: asyncpg.Pool) -> AsyncIterator[Harness]:
    stub_server.reset()
    job_id = await pool.fetchval(
        """
        INSERT INTO generation_jobs
            (lane, domain, status, attempt, worker_id, fair_time, started_at, heartbeat_at)
        VALUES ('replenish', 'python-backend', 'generating', 1, 'test:1', now(), now(), now())
        RETURNING id
        """
    )
    harness = Harness(stub=stub_server, pool=pool, ledger=Ledger(pool, job_id, 1))
    await harness.use_provider()
    yield harness
    await harness.close()


async def test_a_mission_and_its_sabotage_are_decoded_and_each_call_is_priced(
    harness: Harness,
) -> None:
    mission = await harness.write_mission(seed=7)
    sabotage = await harness.plant_bug(mission)

    assert mission == MISSION
    assert sabotage == SabotageDraft(
        sabotaged_files={**GOLD_FILES, **SABOTAGED_FILES},
        bug_summary=ANSWERS["sabotage"]["bug_summary"],
        grader_hint=ANSWERS["sabotage"]["grader_hint"],
    )

    rows = await harness.rows()
    assert [(r["purpose"], r["outcome"]) for r in rows] == [("generate", "ok"), ("sabotage", "ok")]
    for row, (input_tokens, output_tokens) in zip(
        rows, [USAGE["mission"], USAGE["sabotage"]], strict=True
    ):
        assert (row["provider"], row["model"], row["attempt"]) == ("openai", MODEL, 1)
        assert (row["input_tokens"], row["output_tokens"]) == (input_tokens, output_tokens)
        assert row["cost_usd"] == PRICE.cost(input_tokens, output_tokens) > 0
        assert (row["finished"], row["orphaned"], row["error"]) == (True, False, None)

    first, second = harness.stub.received
    assert first.body["model"] == MODEL
    assert first.body["seed"] == 7
    assert first.body["response_format"]["json_schema"]["strict"] is True
    assert [first.schema_name, second.schema_name] == ["mission", "sabotage"]
    assert "test_*.py" in first.prompt
    assert TEST_FILES["test_word_count.py"] in second.prompt
    assert "never to be touched" in second.prompt


@pytest.mark.parametrize(
    ("behaviour", "outcome", "message"),
    [
        ("malformed", "malformed", "the mission answer is not valid JSON"),
        ("wrong_shape", "malformed", "the mission answer does not match its schema"),
        ("truncated", "malformed", "cut off at the model's output limit (900 tokens)"),
        ("refusal", "refused", "the model refused: I'm sorry, I can't help with that."),
    ],
)
async def test_an_unusable_answer_fails_the_call_and_still_counts_its_tokens(
    harness: Harness, behaviour: Behaviour, outcome: str, message: str
) -> None:
    harness.stub.plan(behaviour)
    with pytest.raises(ProviderError, match=re.escape(message)):
        await harness.write_mission()

    assert len(harness.stub.received) == 1
    [row] = await harness.rows()
    assert row["outcome"] == outcome
    assert message in row["error"]
    assert (row["input_tokens"], row["output_tokens"]) == USAGE["mission"]
    assert row["cost_usd"] == PRICE.cost(*USAGE["mission"])


# A call that may have billed, with no usage to say how much, is booked at its ceiling.
CEILING = worst_case_cost_usd(PRICE, 1)
BOOKED = f"; booked at its ceiling of ${CEILING.normalize():f}"


@pytest.mark.parametrize(
    ("behaviour", "outcome", "message", "cost"),
    [
        (
            "server_error",
            "failed",
            "the model API answered 500 Internal Server Error (The server had an error while "
            "processing your request.); not retried, since it may have billed",
            CEILING,
        ),
        (
            "quota",
            "unbilled",
            "the OpenAI account's quota is used up (429 insufficient_quota): add credit or "
            "raise its spending limit",
            0,
        ),
    ],
)
async def test_a_failure_that_may_have_billed_or_cannot_pass_is_tried_once(
    harness: Harness, behaviour: Behaviour, outcome: str, message: str, cost: Decimal
) -> None:
    harness.stub.plan(behaviour, "ok")
    with pytest.raises(ProviderError) as raised:
        await harness.write_mission()

    assert str(raised.value) == message
    assert len(harness.stub.received) == 1, "neither the SDK nor the provider may retry"
    assert harness.waits == []
    [row] = await harness.rows()
    assert (row["outcome"], row["error"], row["input_tokens"], row["cost_usd"]) == (
        outcome,
        message + (BOOKED if cost else ""),
        0,
        cost,
    )


async def test_a_timeout_is_not_retried(harness: Harness) -> None:
    await harness.use_provider(timeout_seconds=0.5)
    harness.stub.delay_seconds = 2
    harness.stub.plan("slow", "ok")
    with pytest.raises(ProviderError) as raised:
        await harness.write_mission()

    assert str(raised.value) == (
        "the model API did not answer within 0.5 s; not retried, since it may have billed"
    )
    assert len(harness.stub.received) == 1
    assert harness.waits == []
    [row] = await harness.rows()
    assert (row["outcome"], row["input_tokens"], row["cost_usd"]) == ("failed", 0, CEILING)


async def test_a_rate_limit_is_retried_after_a_backoff_and_each_try_is_a_row(
    harness: Harness,
) -> None:
    harness.stub.plan("rate_limited", "ok")
    await harness.write_mission()

    assert len(harness.stub.received) == 2
    [wait] = harness.waits
    assert 1 <= wait <= 2, "the first delay (2 s), jittered down by half at most"
    unbilled, ok = await harness.rows()
    assert unbilled["outcome"] == "unbilled"
    assert unbilled["error"] == (
        "the model API rate-limited the request (429: Rate limit reached for requests)"
    )
    assert (unbilled["input_tokens"], unbilled["output_tokens"], unbilled["cost_usd"]) == (0, 0, 0)
    assert ok["outcome"] == "ok"
    assert (ok["input_tokens"], ok["output_tokens"]) == USAGE["mission"]


async def test_a_rate_limit_waits_what_retry_after_asks(harness: Harness) -> None:
    harness.stub.retry_after = "7"
    harness.stub.plan("rate_limited", "rate_limited", "ok")
    await harness.write_mission()

    assert harness.waits == [7.0, 7.0]
    assert await harness.outcomes() == ["unbilled", "unbilled", "ok"]


async def test_a_retry_after_beyond_the_longest_wait_fails_at_once(harness: Harness) -> None:
    harness.stub.retry_after = "300"
    harness.stub.plan("rate_limited", "ok")
    with pytest.raises(ProviderError, match=r"asked to wait 300 s, longer than the 60 s"):
        await harness.write_mission()

    assert len(harness.stub.received) == 1
    assert harness.waits == []
    assert await harness.outcomes() == ["unbilled"]


async def test_rate_limits_give_up_after_the_last_try(harness: Harness) -> None:
    harness.stub.plan("rate_limited", "rate_limited", "rate_limited", "rate_limited", "ok")
    with pytest.raises(ProviderError, match=r"\(429: .*\); gave up after 4 tries, none billed"):
        await harness.write_mission()

    assert len(harness.stub.received) == 4
    # Exponential backoff from the first delay (2 s), each jittered down by half at most.
    first, second, third = harness.waits
    assert 1 <= first <= 2
    assert 2 <= second <= 4
    assert 4 <= third <= 8
    assert await harness.outcomes() == ["unbilled"] * 4


async def test_a_refused_connection_is_retried_and_never_billed(harness: Harness) -> None:
    await harness.use_provider(closed_port_url(), max_tries=3)
    with pytest.raises(ProviderError) as raised:
        await harness.write_mission()

    assert str(raised.value).startswith("could not connect to the model API at 127.0.0.1:")
    assert str(raised.value).endswith("; gave up after 3 tries, none billed")
    assert len(harness.waits) == 2
    rows = await harness.rows()
    assert [(row["outcome"], row["cost_usd"]) for row in rows] == [("unbilled", 0)] * 3


async def test_a_sabotage_that_touches_a_test_file_is_malformed(harness: Harness) -> None:
    harness.stub.answers["sabotage"] = {
        **ANSWERS["sabotage"],
        "sabotaged_files": [
            *ANSWERS["sabotage"]["sabotaged_files"],
            {"path": "test_word_count.py", "content": "def test_nothing():\n    pass\n"},
        ],
    }
    with pytest.raises(ProviderError, match="touches test files, which it must never do"):
        await harness.plant_bug(try_number=2)

    [row] = await harness.rows()
    assert (row["purpose"], row["outcome"]) == ("sabotage", "malformed")
    assert (row["input_tokens"], row["output_tokens"]) == USAGE["sabotage"]
    assert "This is try 2." in harness.stub.received[0].prompt


async def test_the_ledger_sums_match_what_the_stub_reported(harness: Harness) -> None:
    harness.stub.plan("rate_limited", "ok", "truncated", "ok")
    mission = await harness.write_mission()
    with pytest.raises(ProviderError):
        await harness.plant_bug(mission, try_number=1)
    await harness.plant_bug(mission, try_number=2)

    totals = await harness.pool.fetchrow(
        "SELECT count(*) AS calls, sum(input_tokens) AS input_tokens, "
        "sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd "
        "FROM llm_calls WHERE job_id = $1",
        harness.ledger.job_id,
    )
    assert totals is not None
    assert totals["calls"] == len(harness.stub.received) == 4
    assert (totals["input_tokens"], totals["output_tokens"]) == harness.stub.reported_usage()
    answered = [r.usage for r in harness.stub.received if r.usage is not None]
    assert totals["cost_usd"] == sum((PRICE.cost(*usage) for usage in answered), Decimal(0))


async def test_no_request_goes_out_once_the_job_is_lost(harness: Harness) -> None:
    await harness.pool.execute(
        "UPDATE generation_jobs SET status = 'failed' WHERE id = $1", harness.ledger.job_id
    )
    with pytest.raises(JobLost):
        await harness.write_mission()
    assert harness.stub.received == []
    assert await harness.rows() == []
