"""A pool made the way workers make it, with the real prover: catalog missions approved by their
proofs, then the bugs and the renderings that replenishment orders for them, every job run."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from core.domains import DomainMap, parse
from generation.pipeline import MissionPipeline
from generation.provider import Provider
from pool import waiting
from pool.replenish import Replenisher
from qa.proof import Prover
from tests.support.jobs import LIMITS, enqueue
from tests.support.pipelines import run_pending
from tests.support.providers import CatalogInTurn

HEARTBEAT_TIMEOUT = timedelta(seconds=60)
TRACK = "backend-engineer"
# The domains with code, by the language their missions are written in.
DOMAINS = {"python": "python-backend", "javascript": "javascript-frontend", "sql": "sql-data"}


def shares_map(*, retire_after: int, target: int = 0, language: str = "python") -> DomainMap:
    """One domain of `language` alone: missions served `retire_after` times, each bug 5 times,
    no jitter, approved by their proofs; with no target, replenishment orders bugs and
    renderings alone."""
    domain = {
        "kind": "technical",
        "language": language,
        "target": target,
        "retire_after": retire_after,
        "retire_jitter": False,
        "bug_share": 5,
        "review": "proof",
    }
    name = DOMAINS[language]
    return parse({"tracks": {TRACK: [name]}, "domains": {name: domain}}, "test")


def pipeline(
    pool: asyncpg.Pool, prover: Prover, the_map: DomainMap, provider: Provider
) -> MissionPipeline:
    return MissionPipeline(
        db=pool,
        provider=provider,
        prover=prover,
        trust="trusted",
        domain_map=the_map,
        sabotage_tries=3,
        serve_waiting_user=waiting.serve_waiting_user,
    )


async def replenish_until_done(
    pool: asyncpg.Pool, replenisher: Replenisher, make: MissionPipeline
) -> None:
    """Replenishment passes, each job they order run, until a pass orders nothing."""
    for _ in range(10):
        ordered = await replenisher.run_once()
        jobs = [
            job
            for each in ordered.domains
            for job in [*each.enqueued, *each.variant_jobs, *each.rendering_jobs]
        ]
        if not jobs:
            return
        # Variant jobs one at a time: each skips the bugs stored before it starts.
        for _ in jobs:
            await run_pending(pool, make)
    pytest.fail("replenishment never settled")


async def rendered_pool(
    pool: asyncpg.Pool,
    prover: Prover,
    *,
    missions: int,
    retire_after: int,
    language: str = "python",
) -> DomainMap:
    """`missions` different catalog missions of `language`, each with the bugs and renderings
    its serves need, ready; the map they are served under."""
    the_map = shares_map(retire_after=retire_after, language=language)
    make = pipeline(pool, prover, the_map, CatalogInTurn())
    for _ in range(missions):
        await enqueue(pool, None, domain=DOMAINS[language])
        await run_pending(pool, make)
    replenisher = Replenisher(
        pool, the_map, LIMITS, max_per_pass=20, heartbeat_timeout=HEARTBEAT_TIMEOUT
    )
    await replenish_until_done(pool, replenisher, make)
    return the_map
