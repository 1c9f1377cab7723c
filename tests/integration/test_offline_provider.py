"""The offline provider against the real ledger: catalog missions by language and seed, bugs
by seed and try, and one zero-cost ledger row per call with its delay spent inside."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from core.domains import Domain, Kind, Language
from generation.drafts import MissionDraft
from generation.ledger import JobLost, Ledger
from generation.offline import OfflineProvider, catalog
from generation.provider import ProviderError

LANGUAGES: tuple[Language, ...] = ("python", "javascript", "sql", "none")


def domain(language: Language) -> Domain:
    kind: Kind = "non_technical" if language == "none" else "technical"
    return Domain(
        name=f"{language}-missions", kind=kind, language=language, target=1, retire_after=50
    )


@pytest.fixture
async def ledger(pool: asyncpg.Pool) -> Ledger:
    job_id = await pool.fetchval(
        """
        INSERT INTO generation_jobs
            (lane, domain, status, attempt, worker_id, fair_time, started_at, heartbeat_at)
        VALUES ('replenish', 'python-backend', 'generating', 1, 'test:1', now(), now(), now())
        RETURNING id
        """
    )
    return Ledger(pool, job_id, 1)


async def calls(pool: asyncpg.Pool, ledger: Ledger) -> list[asyncpg.Record]:
    return await pool.fetch(
        """
        SELECT purpose, provider, model, input_tokens, output_tokens, cost_usd, outcome,
               finished_at - started_at AS took
        FROM llm_calls WHERE job_id = $1 AND attempt = $2 ORDER BY id
        """,
        ledger.job_id,
        ledger.attempt,
    )


@pytest.mark.parametrize("language", LANGUAGES)
async def test_missions_come_from_the_catalog_by_language_and_seed(
    language: Language, ledger: Ledger, pool: asyncpg.Pool
) -> None:
    provider = OfflineProvider(delay_seconds=0)
    missions = [m for m in catalog.load() if m.language == language]
    drafts = [
        await provider.write_mission(domain(language), seed=seed, ledger=ledger)
        for seed in range(1, 13)
    ]
    chosen = [next(m.slug for m in missions if m.wrote(draft)) for draft in drafts]
    assert len(set(chosen)) >= 3
    assert await provider.write_mission(domain(language), seed=5, ledger=ledger) == drafts[4]

    rows = await calls(pool, ledger)
    assert len(rows) == 13
    for row in rows:
        assert (row["purpose"], row["provider"], row["model"]) == (
            "generate",
            "offline",
            "offline-catalog",
        )
        assert (row["input_tokens"], row["output_tokens"], row["cost_usd"]) == (0, 0, 0)
        assert row["outcome"] == "ok"


async def test_a_bug_is_planted_per_seed_and_try_at_zero_cost(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    provider = OfflineProvider(delay_seconds=0)
    python = domain("python")
    mission = await provider.write_mission(python, seed=42, ledger=ledger)
    first = await provider.plant_bug(python, mission, seed=42, try_number=1, ledger=ledger)
    second = await provider.plant_bug(python, mission, seed=42, try_number=2, ledger=ledger)
    again = await provider.plant_bug(python, mission, seed=42, try_number=1, ledger=ledger)

    assert first == again
    assert first.bug_summary != second.bug_summary
    assert first.sabotaged_files.keys() == mission.gold_files.keys()
    rows = await calls(pool, ledger)
    assert [row["purpose"] for row in rows] == ["generate", "sabotage", "sabotage", "sabotage"]
    assert all(row["cost_usd"] == 0 and row["outcome"] == "ok" for row in rows)


async def test_a_mission_written_elsewhere_is_refused_before_any_call(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    provider = OfflineProvider(delay_seconds=0)
    foreign = MissionDraft(
        title="Word count", brief="Count words.", gold_files={"wc.py": ""}, test_files={}
    )
    with pytest.raises(ProviderError, match="catalog missions only"):
        await provider.plant_bug(domain("python"), foreign, seed=1, try_number=1, ledger=ledger)
    assert await calls(pool, ledger) == []


async def test_the_delay_is_spent_inside_each_call(ledger: Ledger, pool: asyncpg.Pool) -> None:
    provider = OfflineProvider(delay_seconds=0.2)
    sql = domain("sql")
    mission = await provider.write_mission(sql, seed=3, ledger=ledger)
    await provider.plant_bug(sql, mission, seed=3, try_number=1, ledger=ledger)
    assert [row["took"] >= timedelta(seconds=0.2) for row in await calls(pool, ledger)] == [
        True,
        True,
    ]


async def test_a_lost_job_gets_no_further_mission(ledger: Ledger, pool: asyncpg.Pool) -> None:
    await pool.execute("UPDATE generation_jobs SET status = 'failed' WHERE id = $1", ledger.job_id)
    with pytest.raises(JobLost):
        await OfflineProvider(delay_seconds=0).write_mission(
            domain("python"), seed=1, ledger=ledger
        )
    assert await calls(pool, ledger) == []
