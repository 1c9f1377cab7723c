"""Replenishment: one process at a time orders, on the replenish lane, the generations that
each domain's forecast lacks (see `pool.forecast`), in the domains that some live worker can
make: a domain none can make is ordered nothing, where the orders would only wait to expire.

Before missions, in a domain with code, a pass orders rendering jobs, then variant jobs. Each
live variant whose ready renderings (with the rendering jobs under way) hold fewer serves than
it may still be served gets a rendering job, those with the fewest rendered serves left first,
until three of its rendering jobs have failed. Each approved mission whose live variants (with
the variant jobs under way) hold fewer serves than the mission has left gets jobs that plant
another bug in it, one per missing variant, the missions with the fewest serves ready first,
taking turns, until three of its variant jobs have failed. Each kind is ordered at most the
per-pass cap per domain. A rendering costs sandbox time alone and a variant one sabotage and
one proof, where a mission is a whole generation, so the serves an approved mission has left
are supplied by its renderings and bugs first; the forecast that orders missions then counts
the jobs just ordered, and drops the serves of variants that cannot be rendered.

A pass runs in one transaction under an advisory lock: a process that cannot take it skips
its pass, since another one is counting the same pool. The counts and the enqueues share that
transaction, so the next pass, whoever runs it, counts what this one ordered. Each order also
carries an idempotency key that names the domain, the domain's last replenish job (the state
the pass saw) and the slot, so passes over the same state can never order twice even
without the lock.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

import asyncpg
import msgspec

from core import idempotency
from core.domains import DomainMap
from core.ids import Id
from core.sql import Connection, Queries
from generation import admission, registry
from generation.metrics import QueueMetrics
from generation.rendering_jobs import RENDERINGS_PER_JOB
from pool import stats
from pool.stats import RENDERING_FAILURES_TO_GIVE_UP

queries = Queries("pool")
log = logging.getLogger(__name__)

CALLER = "replenisher"
# A mission whose variant jobs failed this often gets no more: its saboteur has run out of bugs
# that its tests catch.
VARIANT_FAILURES_TO_GIVE_UP = 3


class ReplenishOrder(msgspec.Struct, frozen=True):
    """What a replenishment key stands for: a generation in this domain."""

    domain: str


class VariantOrder(msgspec.Struct, frozen=True):
    """What a variant key stands for: another bug in this mission."""

    domain: str
    mission_id: int


class RenderingOrder(msgspec.Struct, frozen=True):
    """What a rendering key stands for: renderings of this variant."""

    domain: str
    variant_id: int


class DomainPass(msgspec.Struct, frozen=True, kw_only=True):
    domain: str
    deficit: int
    # The jobs this pass enqueued, at most the per-pass growth cap.
    enqueued: list[Id]
    # The rendering jobs and the variant jobs this pass enqueued before them, at most the cap
    # each.
    rendering_jobs: list[Id]
    variant_jobs: list[Id]
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
                planted: dict[str, Planted] = {}
                for each in stats.describe(self._domain_map, counted, fleet).domains:
                    if each.enabled and each.reachable:
                        last_job = counted[each.domain].last_replenish_job_id
                        planted[each.domain] = await self._plant(
                            connection, each.domain, last_job, now
                        )
                ordered = {
                    name
                    for name, each in planted.items()
                    if each.renderings.jobs or each.variants.jobs
                }
                if ordered:
                    counted = await stats.count(connection, self._domain_map, now)
                needy = [
                    each
                    for each in stats.describe(self._domain_map, counted, fleet).domains
                    if each.enabled and (each.forecast.deficit > 0 or each.domain in ordered)
                ]
                # The least covered first: when the lane fills up, they got the room.
                needy.sort(key=lambda each: each.forecast.cover or 0.0)
                passes = [
                    await self._order(
                        connection,
                        each,
                        counted[each.domain].last_replenish_job_id,
                        planted.get(each.domain, Planted()),
                        now,
                    )
                    for each in needy
                ]
            if any(each.enqueued or each.variant_jobs or each.rendering_jobs for each in passes):
                await admission.wake_dispatchers(connection)
        return ReplenishPass(ran=True, domains=passes)

    async def _plant(
        self, connection: Connection, name: str, last_job: int | None, now: datetime | None
    ) -> Planted:
        """The rendering jobs, then the variant jobs, that the domain's approved missions lack."""
        domain = self._domain_map.domains[name]
        if domain.language == "none":
            return Planted()  # one flaw per mission, reviewed by a person, never renamed
        variants = await connection.fetch(
            queries["variants_short_of_renderings"],
            name,
            RENDERINGS_PER_JOB,
            self._max_per_pass,
            RENDERING_FAILURES_TO_GIVE_UP,
        )
        renderings = await self._order_each(
            connection,
            name,
            "render",
            [row["id"] for row in variants],
            last_job,
            now,
        )
        if renderings.shed:
            return Planted(renderings=renderings)
        shares = domain.variant_serves(domain.retire_after)
        short = await connection.fetch(
            queries["missions_short_of_variants"],
            name,
            shares,
            self._max_per_pass,
            VARIANT_FAILURES_TO_GIVE_UP,
        )
        lacking = {row["id"]: row["lacking"] for row in short}
        # Taking turns: each mission short of bugs gets one before any gets a second.
        turns = [
            mission
            for turn in range(max(lacking.values(), default=0))
            for mission, count in lacking.items()
            if count > turn
        ]
        variants_ordered = await self._order_each(connection, name, "vary", turns, last_job, now)
        return Planted(renderings=renderings, variants=variants_ordered)

    async def _order_each(
        self,
        connection: Connection,
        name: str,
        kind: Literal["render", "vary"],
        targets: list[int],
        last_job: int | None,
        now: datetime | None,
    ) -> Ordered:
        """A job of `kind` for each target (a variant to render, a mission to vary), at most
        the per-pass cap, each under a key that names its target."""
        ordered: list[Id] = []
        for slot, target in enumerate(targets[: self._max_per_pass]):
            order: RenderingOrder | VariantOrder = (
                RenderingOrder(name, target) if kind == "render" else VariantOrder(name, target)
            )
            job_id = await self._enqueue_once(
                connection,
                name,
                f"{name}:{kind}-{target}:after-job-{last_job or 0}:slot-{slot}",
                idempotency.fingerprint("replenish", order),
                rendering_of=target if kind == "render" else None,
                variant_of=target if kind == "vary" else None,
                now=now,
            )
            if job_id is _SHED:
                return Ordered(ordered, shed=True)
            if job_id is not None:
                ordered.append(Id(job_id))
        if ordered:
            log.info(
                "replenishing %s: %d %s jobs",
                name,
                len(ordered),
                "rendering" if kind == "render" else "variant",
                extra={"domain": name, "job_ids": ordered},
            )
        return Ordered(ordered)

    async def _order(
        self,
        connection: Connection,
        domain_pool: stats.DomainPool,
        last_job: int | None,
        planted: Planted,
        now: datetime | None,
    ) -> DomainPass:
        name, deficit = domain_pool.domain, domain_pool.forecast.deficit
        fingerprint = idempotency.fingerprint("replenish", ReplenishOrder(name))
        enqueued: list[Id] = []
        shed = planted.renderings.shed or planted.variants.shed
        for slot in range(0 if shed else min(deficit, self._max_per_pass)):
            key = f"{name}:after-job-{last_job or 0}:slot-{slot}"
            job_id = await self._enqueue_once(connection, name, key, fingerprint, now=now)
            if job_id is _SHED:
                shed = True
                break
            if job_id is not None:
                enqueued.append(Id(job_id))
        if enqueued:
            log.info(
                "replenishing %s: deficit %d, enqueued %d",
                name,
                deficit,
                len(enqueued),
                extra={"domain": name, "job_ids": enqueued},
            )
        return DomainPass(
            domain=name,
            deficit=deficit,
            enqueued=enqueued,
            rendering_jobs=planted.renderings.jobs,
            variant_jobs=planted.variants.jobs,
            shed=shed,
        )

    async def _enqueue_once(
        self,
        connection: Connection,
        name: str,
        key: str,
        fingerprint: bytes,
        *,
        variant_of: int | None = None,
        rendering_of: int | None = None,
        now: datetime | None,
    ) -> int | _Shed | None:
        """A replenish job under `key`; None when a pass over the same state already ordered
        it, _SHED when the queue refused it."""
        try:
            async with connection.transaction():  # a savepoint: a refusal takes its key back
                if await idempotency.claim(connection, CALLER, key, fingerprint) is not None:
                    return None
                job_id = await admission.enqueue(
                    connection,
                    lane="replenish",
                    user_id=None,
                    track=None,
                    domain=name,
                    variant_of=variant_of,
                    rendering_of=rendering_of,
                    limits=self._limits,
                    now=now,
                    metrics=self._metrics,
                )
                await idempotency.remember(connection, CALLER, key, job_id=job_id)
        except admission.QueueFull as full:
            log.info("replenishing %s stopped: %s", name, full, extra={"domain": name})
            return _SHED
        return job_id


class _Shed(enum.Enum):
    SHED = "shed"


_SHED = _Shed.SHED


@dataclass(frozen=True)
class Ordered:
    """The jobs of one kind a pass ordered in one domain, and whether the queue refused more."""

    jobs: list[Id] = field(default_factory=list)
    shed: bool = False


@dataclass(frozen=True)
class Planted:
    """The rendering jobs and variant jobs a pass ordered in one domain."""

    renderings: Ordered = field(default_factory=Ordered)
    variants: Ordered = field(default_factory=Ordered)
