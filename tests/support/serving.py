"""Serving many users at once through the pool's own entry point, as the API does."""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec

from core import idempotency
from core.domains import DomainMap
from pool import requests
from server.routes.common import ServeBody
from server.settings import Settings
from tests.support.jobs import LIMITS

HEARTBEAT_TIMEOUT = Settings().heartbeat_timeout


def asked(
    domain_map: DomainMap, user_id: str, track: str, cohort: str | None = None
) -> requests.UserRequest:
    body = ServeBody(user_id=user_id, track=track, cohort=cohort)
    return requests.UserRequest(
        user_id=user_id,
        track=track,
        domains=domain_map.domains_for(track),
        key_id=1,
        caller="key:1",
        idempotency_key=None,
        fingerprint=idempotency.fingerprint("POST /v1/serve", body),
        cohort=cohort,
    )


async def serve_all(
    pool: asyncpg.Pool,
    domain_map: DomainMap,
    users: list[str],
    *,
    track: str,
    cohort: str | None = None,
) -> list[requests.Answer]:
    """One serve per user, all at once, over as many connections as the pool holds."""
    return await asyncio.gather(
        *(
            requests.serve_or_enqueue(
                pool,
                asked(domain_map, user, track, cohort),
                limits=msgspec.structs.replace(LIMITS, max_pending=1000),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
            )
            for user in users
        )
    )
