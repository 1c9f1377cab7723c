"""Operator routes (role admin): the queue, the pool per domain, a replenishment pass now, the
live workers."""

from __future__ import annotations

import msgspec
from litestar import get, post
from litestar.di import NamedDependency

from generation import queue_stats, registry
from generation.openai import prices
from pool import stats
from pool.replenish import ReplenishPass
from server.auth import requires
from server.routes.common import problems
from server.services import Services, replenisher


@get(
    "/v1/queue",
    guards=[requires("admin")],
    responses=problems(401, 403, 503),
    summary="Queue depth",
    description="Pending and generating jobs per lane, the limits, and `budget`: where the "
    "daily spend budget stands (null when none is configured); `replenish_paused` or "
    "`exhausted` say that it stops claims.",
)
async def read_queue(services: NamedDependency[Services]) -> queue_stats.QueueStats:
    return await queue_stats.stats(
        services.db,
        global_cap=services.settings.global_cap,
        max_pending=services.settings.max_pending,
        budget=services.budget,
    )


@get(
    "/v1/pool",
    guards=[requires("admin")],
    responses=problems(401, 403, 503),
    summary="The pool per domain",
    description="Stock, review, generations under way, the replenishment forecast (supply, "
    "serve rate, lead time (p90), time to empty, pass rate and the deficit), and whether some "
    "live worker can make the domain (`enabled`) with the reasons of those that cannot; `spend`: "
    "the ledger by how its calls went out (`modes`: direct, background, batch) and the money "
    "saved by calls taken over instead of paid again (`resumed_calls`, "
    "`saved_by_resumed_usd`) and by calls that went through a batch (`saved_by_batch_usd`); "
    "`batches`: the batches not yet ended, the lines waiting to go out in one, and the jobs "
    "waiting for a line.",
)
async def read_pool(services: NamedDependency[Services]) -> stats.PoolView:
    settings = services.settings
    return await stats.read(
        services.db,
        services.domain_map,
        heartbeat_timeout=settings.heartbeat_timeout,
        price_table=prices.load(settings.prices_file),
    )


class Workers(msgspec.Struct):
    workers: list[registry.LiveWorker]


@get(
    "/v1/workers",
    guards=[requires("admin")],
    responses=problems(401, 403, 503),
    summary="The live workers",
    description="Each worker whose heartbeat is younger than WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS "
    "(a stopped one until then): the domains it can make, why it cannot make the others, its "
    "generation slots and the generations it runs.",
)
async def read_workers(services: NamedDependency[Services]) -> Workers:
    fleet = await registry.live(services.db, heartbeat_timeout=services.settings.heartbeat_timeout)
    return Workers(workers=fleet.workers)


@post(
    "/v1/pool/replenish",
    guards=[requires("admin")],
    status_code=202,
    responses=problems(401, 403, 503),
    summary="Run a replenishment pass now",
    description="Answers what the pass enqueued per domain; `ran` is false when another "
    "process was running a pass at that moment.",
)
async def replenish(services: NamedDependency[Services]) -> ReplenishPass:
    refill = replenisher(services.db, services.settings, services.domain_map, services.metrics)
    return await refill.run_once()
