"""Replenishment: one process at a time orders, on the replenish lane, the generations that
each domain's forecast lacks (see `pool.forecast`), in the domains that some live worker can
make: a domain none can make is ordered nothing, where the orders would only wait to expire.

A pass runs in one transaction under an advisory lock: a process that cannot take it skips
its pass, since another one is counting the same pool. The counts and the enqueues share that
transaction, so the next pass, whoever runs it, counts what this one ordered. Each order also
carries an idempotency key that names the domain, the domain's last replenish job (the state
the pass saw) and the slot, so passes over the same state can never order twice even
without the lock.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import asyncpg
import msgspec

from core import idempotency
from core.domains import DomainMap
from core.sql import Connection, Queries
from generation import admission, registry
from generation.metrics import QueueMetrics
from pool import stats

queries = Queries("pool")
log = logging.getLogger(__name__)

CALLER = "replenisher"


class ReplenishOrder(msgspec.Struct, frozen=True):
    """What a replenishment key stands for: a generation in this domain."""

    domain: str


class DomainPass(msgspec.Struct, frozen=True, kw_only=True):
    domain: str
    deficit: int
    # The jobs this pass enqueued, at most the per-pass growth cap.
    enqueued: list[str]
    # The queue refused more (the replenish lane or the queue is full): the rest waits.
    shed: bool


class ReplenishPass(msgspec.Struct, frozen=True, kw_only=True):
    # False: another process was running a pass, and this one did nothing.
    ran: bool
    domains: list[DomainPass]


class Replenisher:
    def __init__(
        self,
        db: asyncpg.Pool,
        domain_map: DomainMap,
        limits: admission.AdmissionLimits,
        *,
        max_per_pass: int,
        heartbeat_timeout: timedelta,
        metrics: QueueMetrics | None = None,
    ) -> None:
        self._db = db
        self._domain_map = domain_map
        self._heartbeat_timeout = heartbeat_timeout
        self._limits = limits
        self._max_per_pass = max_per_pass
        self._metrics = metrics

    async def run_once(self, now: datetime | None = None) -> ReplenishPass:
        async with self._db.acquire() as connection:
            async with connection.transaction():
                if not await connection.fetchval(queries["replenish_leader_try_lock"]):
                    return ReplenishPass(ran=False, domains=[])
                counted = await stats.count(connection, self._domain_map, now)
                fleet = await registry.live(
                    connection, heartbeat_timeout=self._heartbeat_timeout, now=now
                )
                needy = [
                    each
                    for each in stats.describe(self._domain_map, counted, fleet).domains
                    if each.forecast.deficit > 0 and each.enabled
                ]
                # The least covered first: when the lane fills up, they got the room.
                needy.sort(key=lambda each: each.forecast.cover or 0.0)
                passes = [
                    await self._order(
                        connection, each, counted[each.domain].last_replenish_job_id, now
                    )
                    for each in needy
                ]
            if any(each.enqueued for each in passes):
                await admission.wake_dispatchers(connection)
        return ReplenishPass(ran=True, domains=passes)

    async def _order(
        self,
        connection: Connection,
        domain_pool: stats.DomainPool,
        last_job: int | None,
        now: datetime | None,
    ) -> DomainPass:
        name, deficit = domain_pool.domain, domain_pool.forecast.deficit
        fingerprint = idempotency.fingerprint("replenish", ReplenishOrder(name))
        enqueued: list[str] = []
        for slot in range(min(deficit, self._max_per_pass)):
            key = f"{name}:after-job-{last_job or 0}:slot-{slot}"
            try:
                async with connection.transaction():  # a savepoint: a refusal takes its key back
                    if await idempotency.claim(connection, CALLER, key, fingerprint) is not None:
                        continue  # a pass over the same state already ordered this slot
                    job_id = await admission.enqueue(
                        connection,
                        lane="replenish",
                        user_id=None,
                        track=None,
                        domain=name,
                        limits=self._limits,
                        now=now,
                        metrics=self._metrics,
                    )
                    await idempotency.remember(connection, CALLER, key, job_id=job_id)
                enqueued.append(str(job_id))
            except admission.QueueFull as full:
                log.info(
                    "replenishing %s stopped after %d: %s",
                    name,
                    len(enqueued),
                    full,
                    extra={"domain": name},
                )
                return DomainPass(domain=name, deficit=deficit, enqueued=enqueued, shed=True)
        if enqueued:
            log.info(
                "replenishing %s: deficit %d, enqueued %d",
                name,
                deficit,
                len(enqueued),
                extra={"domain": name, "job_ids": enqueued},
            )
        return DomainPass(domain=name, deficit=deficit, enqueued=enqueued, shed=False)
