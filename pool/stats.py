"""The pool per domain: stock, review, generations under way, the forecast and whether a live
worker can make it, counted from the tables as GET /v1/pool, `warmpool status` and the
replenisher read them; and the serves made, ever and hour by hour, as the metrics and the pool
page show them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec

from core.domains import DomainMap
from core.sql import Executor, Queries
from generation import domain_jobs, ledger, registry
from generation.openai import prices
from generation.openai.batches import OpenBatches, open_batches
from generation.openai.prices import PriceTable
from generation.registry import DisabledReason
from pool.forecast import (
    HISTORY,
    LONG_DEMAND_WINDOW,
    SHORT_DEMAND_WINDOW,
    Forecast,
    Measured,
    forecast,
)

queries = Queries("pool")

# A variant whose rendering jobs failed this often gets no more, and its serves that no ready
# rendering holds no longer count as supply: they cannot be served.
RENDERING_FAILURES_TO_GIVE_UP = 3


class Counted(msgspec.Struct, frozen=True, kw_only=True):
    """One domain as a replenishment pass saw it."""

    measured: Measured
    # The domain's last replenish job: it names the state the pass saw, in its keys.
    last_replenish_job_id: int | None
    # What the domain's model calls cost, and the instances it served, ever.
    spend_usd: float
    serves: int


class DomainPool(msgspec.Struct, frozen=True, kw_only=True):
    domain: str
    kind: str
    approved: int
    awaiting_review: int
    # The serves left on approved missions; of those, what can be served now (the serves that
    # their live variants' ready renderings hold) and what can be once rendered.
    remaining_serves: int
    servable_serves: int
    stock_serves: int
    # Variants ready: live variants of approved missions; and the ready renderings they hold
    # with a serve left.
    live_variants: int
    renderings_ready: int
    # Jobs planting another bug in an approved mission, and jobs rendering a live variant,
    # pending or generating.
    variant_jobs: int
    rendering_jobs: int
    target: int
    # Generating now, and waiting for a slot (both lanes).
    in_flight: int
    pending: int
    # Some track may be served this domain; one that none may is never replenished.
    reachable: bool
    # Some live worker can make this domain's missions: only then is it replenished, or a
    # user's generation enqueued in it.
    enabled: bool
    # Why each live worker that cannot make it cannot.
    disabled_reasons: list[DisabledReason]
    forecast: Forecast
    # What the domain's model calls cost and the instances it served, ever, and the cost of a
    # served instance (None until one is served).
    spend_usd: float
    serves: int
    cost_per_served_instance_usd: float | None


class PoolStats(msgspec.Struct, frozen=True):
    domains: list[DomainPool]


class PoolView(PoolStats, frozen=True):
    """The pool with what its generations cost, and its batches under way."""

    spend: ledger.SpendByMode
    batches: OpenBatches


async def count(
    connection: Executor, domain_map: DomainMap, now: datetime | None = None
) -> dict[str, Counted]:
    """Every domain of the map, counted; `now` moves the windows (tests), else the clock."""
    now = now or datetime.now(UTC)
    names = list(domain_map.domains)
    since = now - HISTORY
    jobs = await domain_jobs.jobs_by_domain(connection, names, since=since, now=now)
    missions = {
        row["domain"]: row
        for row in await connection.fetch(
            queries["missions_by_domain"], names, since, now, RENDERING_FAILURES_TO_GIVE_UP
        )
    }
    serves = {
        row["domain"]: row
        for row in await connection.fetch(
            queries["serves_by_domain"],
            names,
            now - SHORT_DEMAND_WINDOW,
            now - LONG_DEMAND_WINDOW,
            now,
        )
    }
    spent = await ledger.cost_by_domain(connection, names)
    served = await serves_ever(connection, domain_map)
    return {
        name: Counted(
            spend_usd=spent[name],
            serves=served[name],
            measured=Measured(
                approved=missions[name]["approved"],
                remaining_serves=missions[name]["remaining_serves"],
                servable_serves=missions[name]["servable_serves"],
                stock_serves=missions[name]["stock_serves"],
                live_variants=missions[name]["live_variants"],
                renderings_ready=missions[name]["renderings_ready"],
                variant_jobs=jobs[name].variant_jobs,
                rendering_jobs=jobs[name].rendering_jobs,
                awaiting_review=missions[name]["awaiting_review"],
                pending=jobs[name].pending,
                generating=jobs[name].generating,
                serves_in_short_window=serves[name]["serves_short"],
                serves_in_long_window=serves[name]["serves_long"],
                generated=jobs[name].generated,
                generation_failures=jobs[name].failed,
                approvals=missions[name]["approvals"],
                rejections=missions[name]["rejections"],
                lead_time_p90_s=missions[name]["lead_time_p90_s"],
                lead_time_samples=missions[name]["lead_time_samples"],
            ),
            last_replenish_job_id=jobs[name].last_replenish_job_id,
        )
        for name in names
    }


def reachable(domain_map: DomainMap) -> frozenset[str]:
    return frozenset(name for names in domain_map.tracks.values() for name in names)


def describe(
    domain_map: DomainMap, counted: dict[str, Counted], fleet: registry.Fleet
) -> PoolStats:
    served = reachable(domain_map)
    return PoolStats(
        domains=[
            _domain_pool(domain_map, name, each, name in served, fleet)
            for name, each in counted.items()
        ]
    )


async def read(
    connection: Executor,
    domain_map: DomainMap,
    *,
    heartbeat_timeout: timedelta,
    now: datetime | None = None,
    price_table: PriceTable | None = None,
) -> PoolView:
    """The pool; a worker is live while its heartbeat is younger than `heartbeat_timeout`.
    What batching saved is priced from `price_table` (the built-in prices without one)."""
    counted = await count(connection, domain_map, now)
    fleet = await registry.live(connection, heartbeat_timeout=heartbeat_timeout, now=now)
    described = describe(domain_map, counted, fleet)
    totals = await ledger.totals(connection)
    table = price_table or prices.load()
    spend = ledger.spend_by_mode(
        totals, saved_by_batch_usd=table.batch_savings(totals.batched_by_model)
    )
    return PoolView(domains=described.domains, spend=spend, batches=await open_batches(connection))


def _domain_pool(
    domain_map: DomainMap,
    name: str,
    counted: Counted,
    is_reachable: bool,
    fleet: registry.Fleet,
) -> DomainPool:
    domain = domain_map.domains[name]
    measured = counted.measured
    outlook = forecast(domain, measured)
    return DomainPool(
        domain=name,
        kind=domain.kind,
        approved=measured.approved,
        awaiting_review=measured.awaiting_review,
        remaining_serves=measured.remaining_serves,
        servable_serves=measured.servable_serves,
        stock_serves=measured.stock_serves,
        live_variants=measured.live_variants,
        renderings_ready=measured.renderings_ready,
        variant_jobs=measured.variant_jobs,
        rendering_jobs=measured.rendering_jobs,
        target=domain.target,
        in_flight=measured.generating,
        pending=measured.pending,
        reachable=is_reachable,
        enabled=fleet.can_make(name),
        disabled_reasons=fleet.disabled_reasons(name),
        forecast=outlook if is_reachable else msgspec.structs.replace(outlook, deficit=0),
        spend_usd=counted.spend_usd,
        serves=counted.serves,
        cost_per_served_instance_usd=(
            round(counted.spend_usd / counted.serves, 6) if counted.serves else None
        ),
    )


class HourOfServes(msgspec.Struct, frozen=True):
    # The start of a UTC clock hour.
    hour: datetime
    serves: int


async def serves_ever(connection: Executor, domain_map: DomainMap) -> dict[str, int]:
    rows = await connection.fetch(queries["serves_by_domain_ever"], list(domain_map.domains))
    return {row["domain"]: row["serves"] for row in rows}


async def serves_by_hour(
    connection: Executor, domain_map: DomainMap, *, hours: int, now: datetime | None = None
) -> dict[str, list[HourOfServes]]:
    """Every domain's serves in each of the last `hours` clock hours, the oldest first; the
    last is the hour under way."""
    rows = await connection.fetch(
        queries["serves_by_domain_and_hour"],
        list(domain_map.domains),
        hours,
        now or datetime.now(UTC),
    )
    history: dict[str, list[HourOfServes]] = {name: [] for name in domain_map.domains}
    for row in rows:
        history[row["domain"]].append(HourOfServes(row["hour"], row["serves"]))
    return history
