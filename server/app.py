"""The litestar application: `create_app(settings)` and nothing configured at import time."""

from __future__ import annotations

import functools
import gc
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import asyncpg
from litestar import Litestar
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from prometheus_client import CollectorRegistry

from core import domains
from core.ids import Id
from generation.metrics import QueueMetrics
from server import database, migrate, openapi, ui
from server.auth import KeyStore, bootstrap_keys
from server.deadline import RequestDeadline
from server.errors import exception_handlers
from server.generation_wiring import opened_provider, spend_budget
from server.metrics import Scraping, read_snapshot
from server.routes import health, jobs, metrics, operators, review, serve, submissions
from server.routes.options import with_options
from server.runtime import running_worker
from server.services import Services, grading_limits, provide_services, queue_limits
from server.settings import Settings
from server.snapshots import Snapshots

log = logging.getLogger(__name__)


def create_app(settings: Settings, *, run_worker: bool = False) -> Litestar:
    """Build the app. A bad domain map raises here, before anything starts."""
    domain_map = domains.load(settings.domain_map)
    # The app's own registry: two apps in one process never share a counter.
    counters = QueueMetrics(CollectorRegistry())

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        url = await database.resolve_url(settings)
        async with AsyncExitStack() as resources:
            db = await database.create_pool(url)
            resources.push_async_callback(db.close)
            async with db.acquire() as connection:
                await migrate.apply(connection)
            if settings.database_url is None:
                await _first_start_keys(db)
            chosen = await resources.enter_async_context(opened_provider(settings))
            budget = spend_budget(settings, chosen.provider)
            # The scrapes' own connection, made at the first one: however many arrive, they
            # never take one that requests need.
            metrics_db = await database.create_pool(url, min_size=0, max_size=1)
            resources.push_async_callback(metrics_db.close)
            snapshots = Snapshots(
                metrics_db,
                functools.partial(
                    read_snapshot, settings=settings, domain_map=domain_map, budget=budget
                ),
                max_age_seconds=settings.metrics_refresh_seconds,
            )
            resources.push_async_callback(snapshots.close)
            app.state.services = Services(
                settings=settings,
                domain_map=domain_map,
                limits=queue_limits(settings),
                db=db,
                keys=KeyStore(db),
                budget=budget,
                metrics=counters,
                scraping=Scraping(snapshots, counters.registry),
                grading_limits=grading_limits(settings),
            )
            if run_worker:
                await resources.enter_async_context(
                    running_worker(db, url, settings, domain_map, chosen, counters)
                )
            # What start-up made lives as long as the process: out of the collector's
            # way, so that full collections stay short on the request path.
            gc.freeze()
            yield

    return Litestar(
        route_handlers=[
            *with_options(
                [
                    health.healthz,
                    health.readyz,
                    metrics.scrape,
                    jobs.create_job,
                    jobs.read_job,
                    jobs.cancel_job,
                    operators.read_queue,
                    operators.read_pool,
                    operators.read_workers,
                    operators.replenish,
                    serve.serve,
                    serve.read_instance,
                    serve.user_instances,
                    submissions.submit,
                    submissions.read_submission,
                    submissions.instance_submissions,
                    submissions.read_qa_instance,
                    review.list_missions,
                    review.read_mission,
                    review.approve_mission,
                    review.reject_mission,
                    review.retire_mission,
                    review.retire_variant,
                    review.trace_text,
                ]
            ),
            ui.router(settings),
        ],
        plugins=openapi.plugins(domain_map),
        type_encoders={Id: str},
        template_config=ui.template_config(),
        dependencies={"services": Provide(provide_services, sync_to_thread=False)},
        exception_handlers=exception_handlers(),
        middleware=[RequestDeadline(settings.request_timeout_seconds)],
        lifespan=[lifespan],
        logging_config=None,  # the command line configures logging, once per process
        openapi_config=OpenAPIConfig(
            title="warmpool",
            version="1",
            path="/schema",
            render_plugins=[SwaggerRenderPlugin()],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
            ),
            security=[{"bearer": []}],
        ),
    )


async def _first_start_keys(db: asyncpg.Pool) -> None:
    """On the embedded default's first start, one key per role, printed once (never logged)."""
    created = await bootstrap_keys(db)
    if created:
        print("warmpool: first start, created one API key per role (shown only now):")
        for role, key in created.items():
            print(f"  {role:<14} {key}")
        # At once, even when stdout is a file or a pipe (a service manager's journal).
        sys.stdout.flush()
