"""What route handlers are given: the database pool (`db`), the key store, the domain map, the
queue limits, the spend budget, this process's counters and what its scrapes share; and the
replenisher as the worker and the operators' route build it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg
from litestar import Request

from core.domains import DomainMap
from generation.admission import AdmissionLimits
from generation.budget import Budget
from generation.gradings import GradingLimits
from generation.metrics import QueueMetrics
from pool.replenish import Replenisher
from server.auth import KeyStore
from server.metrics import Scraping
from server.settings import Settings


@dataclass
class Services:
    settings: Settings
    domain_map: DomainMap
    limits: AdmissionLimits
    db: asyncpg.Pool
    keys: KeyStore
    budget: Budget | None
    metrics: QueueMetrics
    scraping: Scraping
    grading_limits: GradingLimits


def queue_limits(settings: Settings) -> AdmissionLimits:
    return AdmissionLimits(
        user_cap=settings.user_cap,
        max_pending=settings.max_pending,
        replenish_max_pending=settings.replenish_max_pending,
    )


def grading_limits(settings: Settings) -> GradingLimits:
    return GradingLimits(
        user_cap=settings.grading_user_cap,
        max_pending=settings.grading_max_pending,
        max_per_instance=settings.grading_max_per_instance,
        window_s=settings.grading_window_seconds,
    )


def replenisher(
    db: asyncpg.Pool,
    settings: Settings,
    domain_map: DomainMap,
    metrics: QueueMetrics | None = None,
) -> Replenisher:
    return Replenisher(
        db,
        domain_map,
        queue_limits(settings),
        max_per_pass=settings.replenish_max_per_pass,
        heartbeat_timeout=settings.heartbeat_timeout,
        metrics=metrics,
    )


def provide_services(request: Request[Any, Any, Any]) -> Services:
    services: Services = request.app.state.services
    return services
