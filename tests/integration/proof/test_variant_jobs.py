"""Variants made ahead of demand: the replenisher orders, for an approved mission, the bugs its
serves need, and each variant job plants one through the provider and the ledger, proves it
with the real prover and stores it, ready to serve."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import msgspec
import pytest

from core.domains import DomainMap
from generation.offline import OfflineProvider
from pool.replenish import Replenisher
from qa.proof import Prover
from tests.support.jobs import LIMITS
from tests.support.pipelines import run_pending, shipped_map
from tests.support.proving import require
from tests.support.rendered_pool import pipeline

HEARTBEAT_TIMEOUT = timedelta(seconds=60)
pytestmark = pytest.mark.usefixtures("standing_worker")


def only_python(retire_after: int) -> DomainMap:
    """python-backend alone, its missions served `retire_after` times, each bug 5 times."""
    shipped = shipped_map(retire_after=retire_after, retire_jitter=False, target=1)
    return msgspec.structs.replace(
        shipped,
        tracks={"backend-engineer": ("python-backend",)},
        domains={"python-backend": shipped.domains["python-backend"]},
    )


async def test_the_replenisher_plants_the_bugs_an_approved_mission_needs(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    the_map = only_python(retire_after=15)
    make = pipeline(pool, prover, the_map, OfflineProvider(delay_seconds=0))
    replenisher = Replenisher(
        pool, the_map, LIMITS, max_per_pass=5, heartbeat_timeout=HEARTBEAT_TIMEOUT
    )
    first = await replenisher.run_once()
    mission_jobs = [int(job) for job in first.domains[0].enqueued]
    await run_pending(pool, make, count=len(mission_jobs))
    mission = await pool.fetchval(
        "SELECT min(mission_id) FROM generation_jobs WHERE id = ANY($1)", mission_jobs
    )
    await pool.execute("UPDATE missions SET qa_status = 'approved' WHERE id = $1", mission)

    # 15 serves at 5 a bug: two more bugs, ordered once however often the pass runs (and the
    # first bug's renderings, ordered before them).
    second = await replenisher.run_once()
    variant_jobs = [job for each in second.domains for job in each.variant_jobs]
    assert len(variant_jobs) == 2
    assert len([job for each in second.domains for job in each.rendering_jobs]) == 1
    again = await replenisher.run_once()
    assert [job for each in again.domains for job in each.variant_jobs] == []
    assert {
        row["variant_of"]
        for row in await pool.fetch(
            "SELECT variant_of FROM generation_jobs WHERE id = ANY($1)",
            [int(j) for j in variant_jobs],
        )
    } == {mission}
    # One at a time: a variant job skips the bugs stored before it starts.
    for _ in range(3):
        await run_pending(pool, make)

    jobs = await pool.fetch(
        "SELECT status, error, mission_id FROM generation_jobs WHERE id = ANY($1)",
        [int(job) for job in variant_jobs],
    )
    assert [(row["status"], row["error"], row["mission_id"]) for row in jobs] == [
        ("completed", None, mission)
    ] * 2
    variants = await pool.fetch(
        """SELECT v.*, r.status AS rendering, r.files = v.sabotaged_files || m.test_files AS own
           FROM mission_variants v JOIN mission_renderings r ON r.variant_id = v.id
           JOIN missions m ON m.id = v.mission_id
           WHERE v.mission_id = $1 AND r.renderer = 'identity' ORDER BY v.id""",
        mission,
    )
    assert len(variants) == 3
    assert (
        len({msgspec.json.encode(row["sabotaged_files"], order="sorted") for row in variants}) == 3
    )
    for row in variants:
        assert (row["max_serves"], row["rendering"], row["own"]) == (5, "ready", True)
        assert row["rendered_serves"] >= 1, "the identity rendering is served once"
        proof = row["proof"]
        assert proof["gold"]["passed"] == proof["gold"]["total"] > 0
        last = proof["sabotage_tries"][-1]
        assert last["total"] > 0
        assert last["failed"] + last["errored"] == last["total"], "sabotage_must_fail: all"
    # Each variant job made one sabotage call per try through the ledger, at no cost offline.
    calls = await pool.fetch(
        "SELECT purpose, cost_usd FROM llm_calls WHERE job_id = ANY($1)",
        [int(job) for job in variant_jobs],
    )
    assert calls
    assert {(row["purpose"], row["cost_usd"]) for row in calls} == {("sabotage", 0)}
    # Now the mission's serves are all covered: nothing more is ordered, and the pool says so.
    last = await replenisher.run_once()
    assert [job for each in last.domains for job in each.variant_jobs] == []
    servable = await pool.fetchval(
        """SELECT sum(v.max_serves - v.serve_count) FROM mission_variants v
           WHERE v.mission_id = $1 AND v.retired_at IS NULL""",
        mission,
    )
    assert servable == 15
