"""Wiring the generation side from the settings: the provider and the trust its output gets,
the daily budget with each job's reservation, the proof runner this machine supports, and the
mission pipeline that joins them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import NamedTuple
from urllib.parse import urlsplit

import asyncpg

from core.domains import DomainMap
from generation.budget import Budget
from generation.offline import OfflineProvider
from generation.openai import prices
from generation.openai.provider import OpenAIProvider
from generation.pipeline import MissionPipeline
from generation.provider import Provider
from pool import waiting
from qa.proof import Prover
from qa.results import Trust
from server import places
from server.settings import Settings

log = logging.getLogger(__name__)


class ChosenProvider(NamedTuple):
    provider: Provider
    # Trust follows provenance: model output is untrusted and runs only in the full sandbox;
    # the offline catalog and its mutations ship with warmpool.
    trust: Trust


def check_prices(settings: Settings) -> None:
    """At start-up, before anything else: the configured model must have a price, or its
    spend could not be counted. Raises `prices.PriceError` naming the model and the fix."""
    if settings.openai_api_key:
        table = prices.load(settings.prices_file)
        table.for_model(settings.model)
        if settings.batch != "off":
            table.batch_for_model(settings.model)


@asynccontextmanager
async def opened_provider(settings: Settings) -> AsyncIterator[ChosenProvider]:
    """The provider the settings choose, closed at the end."""
    chosen = _choose(settings)
    try:
        yield chosen
    finally:
        await chosen.provider.close()


def _choose(settings: Settings) -> ChosenProvider:
    if not settings.openai_api_key:
        log.info(
            "no OPENAI_API_KEY: missions come from the offline provider (built-in catalog, "
            "procedural bugs, %gs per call)",
            settings.offline_delay_seconds,
        )
        return ChosenProvider(
            OfflineProvider(delay_seconds=settings.offline_delay_seconds), "trusted"
        )
    provider = OpenAIProvider(
        api_key=settings.openai_api_key,
        model=settings.model,
        prices=prices.load(settings.prices_file),
        timeout_seconds=settings.openai_timeout_seconds,
        base_url=settings.openai_base_url,
        calls=settings.openai_calls,
        batch=settings.batch,
    )
    host = (
        urlsplit(settings.openai_base_url).hostname
        if settings.openai_base_url
        else "api.openai.com"
    )
    log.info(
        "missions come from the openai provider: model %s at %s, %s calls, batch %s",
        settings.model,
        host,
        settings.openai_calls,
        settings.batch,
    )
    return ChosenProvider(provider, "untrusted")


def spend_budget(settings: Settings, provider: Provider) -> Budget | None:
    """The daily budget, with each job's reservation: every call of the pipeline at its
    ceiling (a mission, then up to `sabotage_tries` sabotages)."""
    if settings.daily_budget_usd is None:
        return None
    daily = Decimal(str(settings.daily_budget_usd))
    return Budget(
        daily_usd=daily,
        job_reservation_usd=provider.worst_case_cost_usd(1 + settings.sabotage_tries),
        interactive_reserve_usd=daily * Decimal(str(settings.budget_interactive_reserve)),
    )


@asynccontextmanager
async def mission_pipeline(
    db: asyncpg.Pool,
    settings: Settings,
    domain_map: DomainMap,
    database_url: str,
    chosen: ChosenProvider,
) -> AsyncIterator[MissionPipeline]:
    folders = places.of(settings.data_dir)
    prover = await Prover.start(
        work_root=folders.proofs,
        toolchain_root=folders.toolchain,
        postgres_admin_url=settings.proof_database_url or database_url,
        slots=settings.proof_slots,
        time_limit_s=settings.proof_time_limit_seconds,
    )
    for line in prover.describe():
        log.info("proofs: %s", line)
    log.info(
        "proofs on %d slots of their own",
        settings.proof_slots,
        extra={"prover": "generation", "slot_uids": list(prover.slot_uids)},
    )
    try:
        pipeline = MissionPipeline(
            db=db,
            provider=chosen.provider,
            prover=prover,
            trust=chosen.trust,
            domain_map=domain_map,
            sabotage_tries=settings.sabotage_tries,
            serve_waiting_user=waiting.serve_waiting_user,
        )
        for domain in domain_map.domains.values():
            problem = pipeline.unavailable(domain)
            if problem is not None:
                log.warning("domain %s is disabled on this worker: %s", domain.name, problem)
        yield pipeline
    finally:
        await prover.close()
