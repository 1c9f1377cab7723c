"""What the workers can make, for tests: the capabilities of a worker with every tool, and a
worker's row standing in for a fleet, for tests whose users' generations must be enqueued with
no worker process running."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import asyncpg

from core import domains
from generation.registry import Capabilities
from tests.support.server import ROOT

DOMAIN_MAP = domains.load(ROOT / "domain_map.yaml")
EVERY_DOMAIN = Capabilities.judged(DOMAIN_MAP.domains.values(), lambda _: None)


def capabilities_without(cannot_make: Iterable[str], reason: str) -> Capabilities:
    """Every domain of the repository's map but those of `cannot_make`, which fail for `reason`."""
    excluded = set(cannot_make)
    return Capabilities.judged(
        DOMAIN_MAP.domains.values(), lambda domain: reason if domain.name in excluded else None
    )


async def standing_worker(
    database_url: str,
    name: str = "standing-worker",
    *,
    domains: Iterable[str] = EVERY_DOMAIN.domains,
    disabled: Mapping[str, str] | None = None,
) -> None:
    """A worker's row that stays live for the whole test: its heartbeat is set a day ahead, so
    no test outlives it whatever its heartbeat timeout."""
    connection = await asyncpg.connect(database_url)
    try:
        await connection.execute(
            """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots, domains,
                   disabled)
               VALUES ($1, $1 || ':standing:0', now(), now() + interval '1 day', 0, $2, $3::jsonb)""",
            name,
            list(domains),
            json.dumps(dict(disabled or {})),
        )
    finally:
        await connection.close()
