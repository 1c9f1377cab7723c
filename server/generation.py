"""Building what a worker generates with: the provider the settings choose, the proof runner
this machine supports, and the mission pipeline that joins them."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from urllib.parse import urlsplit

from core.domains import DomainMap
from generation.budget import Budget
from generation.offline import OfflineProvider
from generation.openai import prices
from generation.openai.provider import OpenAIProvider, worst_case_cost_usd
from generation.pipeline import MissionPipeline
from generation.provider import Provider
from pool import waiting
from qa.proof import Prover
from qa.results import Trust
from server.settings import Settings

log = logging.getLogger(__name__)


@asynccontextmanager
async def mission_pipeline(
    settings: Settings, domain_map: DomainMap, database_url: str
) -> AsyncIterator[MissionPipeline]:
    provider, trust = _provider(settings)
    prover = await Prover.start(
        # Absolute: the sandbox mounts these paths by name.
        work_root=settings.data_dir.resolve() / "proofs",
        toolchain_root=settings.data_dir.resolve() / "toolchain",
        postgres_admin_url=settings.proof_database_url or database_url,
        slots=settings.proof_slots,
        time_limit_s=settings.proof_time_limit_seconds,
    )
    for line in prover.describe():
        log.info("proofs: %s", line)
    try:
        pipeline = MissionPipeline(
            provider=provider,
            prover=prover,
            trust=trust,
            domain_map=domain_map,
            sabotage_tries=settings.sabotage_tries,
            prompt_version=getattr(provider, "prompt_version", None),
            serve_waiting_user=waiting.serve_waiting_user,
        )
        for domain in domain_map.domains.values():
            problem = pipeline.unavailable(domain)
            if problem is not None:
                log.warning("domain %s is disabled on this worker: %s", domain.name, problem)
        yield pipeline
    finally:
        await prover.close()
        if isinstance(provider, OpenAIProvider):
            await provider.aclose()


def check_prices(settings: Settings) -> None:
    """At start-up, before anything else: the configured model must have a price, or its
    spend could not be counted. Raises `prices.PriceError` naming the model and the fix."""
    if settings.openai_api_key:
        prices.load(settings.prices_file).for_model(settings.model)


def _provider(settings: Settings) -> tuple[Provider, Trust]:
    # Trust follows provenance: model output is untrusted and runs only in the full sandbox;
    # the offline catalog and its mutations ship with warmpool.
    if not settings.openai_api_key:
        log.info(
            "no OPENAI_API_KEY: missions come from the offline provider (built-in catalog, "
            "procedural bugs, %gs per call)",
            settings.offline_delay_seconds,
        )
        return OfflineProvider(delay_seconds=settings.offline_delay_seconds), "trusted"
    provider = OpenAIProvider(
        api_key=settings.openai_api_key,
        model=settings.model,
        prices=prices.load(settings.prices_file),
        timeout_seconds=settings.openai_timeout_seconds,
        base_url=settings.openai_base_url,
    )
    host = (
        urlsplit(settings.openai_base_url).hostname
        if settings.openai_base_url
        else "api.openai.com"
    )
    log.info("missions come from the openai provider: model %s at %s", settings.model, host)
    return provider, "untrusted"


def spend_budget(settings: Settings) -> Budget | None:
    """The daily budget, with each job's reservation: every call of the pipeline at its
    ceiling (a mission, then up to `sabotage_tries` sabotages). The offline provider is free."""
    if settings.daily_budget_usd is None:
        return None
    calls = 1 + settings.sabotage_tries
    reservation = Decimal(0)
    if settings.openai_api_key:
        price = prices.load(settings.prices_file).for_model(settings.model)
        reservation = worst_case_cost_usd(price, calls)
    daily = Decimal(str(settings.daily_budget_usd))
    return Budget(
        daily_usd=daily,
        job_reservation_usd=reservation,
        interactive_reserve_usd=daily * Decimal(str(settings.budget_interactive_reserve)),
    )
