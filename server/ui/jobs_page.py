"""The jobs page: each domain's queue per lane with its last failure and whether a live worker
can make it, then the jobs themselves, newest first, filtered by status, lane, domain and user,
a page at a time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple, get_args
from urllib.parse import urlencode

from litestar import Request, get
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template

from generation import job_listing, queue_stats, registry
from generation.jobs import LANES, JobStatus
from server.auth import Caller
from server.errors import BadRequest
from server.routes.common import MAX_ID_DIGITS, MAX_USER_ID, check_domain
from server.services import Services
from server.ui.rendering import page

PAGE_SIZE = 50
STATUSES: tuple[JobStatus, ...] = get_args(JobStatus)
# What an operator looks at first: the queue, and what went wrong.
SHOWN_FIRST: tuple[JobStatus, ...] = ("pending", "generating", "failed")


@get("/jobs")
async def jobs_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    status: FromQuery[list[str] | None] = None,
    lane: FromQuery[str] = "",
    domain: FromQuery[str] = "",
    user: FromQuery[str] = "",
    before: FromQuery[str] = "",
) -> Template:
    shown = _filter(services, status, lane, domain, user.strip(), before)
    settings = services.settings
    domains = sorted(services.domain_map.domains)
    async with services.db.acquire() as connection:
        queued = await queue_stats.stats(
            connection, global_cap=settings.global_cap, max_pending=settings.max_pending
        )
        glance = await job_listing.at_a_glance(connection, domains)
        fleet = await registry.live(connection, heartbeat_timeout=settings.heartbeat_timeout)
        listed = await job_listing.page(connection, shown, every_domain=domains, size=PAGE_SIZE)
    query = _query(shown)
    return page(
        request,
        "jobs.html",
        reviewer=reviewer,
        queued=queued,
        domains=_by_domain(glance, fleet),
        fleet=fleet,
        listed=listed,
        shown=shown,
        statuses=STATUSES,
        lanes=LANES,
        domain_choices=domains,
        older=None
        if listed.older_than is None
        else urlencode([*query, ("before", listed.older_than)], doseq=True),
        newest=urlencode(query, doseq=True) if shown.before else None,
        now=datetime.now(UTC),
    )


def _filter(
    services: Services,
    statuses: list[str] | None,
    lane: str,
    domain: str,
    user: str,
    before: str,
) -> job_listing.JobFilter:
    """The page's query, checked: a bad value is a 422 page that names it."""
    for each in statuses or ():
        if each not in STATUSES:
            raise BadRequest(f"unknown status {each!r}; the statuses: {', '.join(STATUSES)}")
    if lane and lane not in LANES:
        raise BadRequest(f"unknown lane {lane!r}; the lanes: {', '.join(LANES)}")
    check_domain(domain or None, services.domain_map)
    if len(user) > MAX_USER_ID:
        raise BadRequest(f"the user id is {len(user)} characters long; the limit is {MAX_USER_ID}")
    if before and not (before.isascii() and before.isdigit() and len(before) <= MAX_ID_DIGITS):
        raise BadRequest(f"before must be a job id, not {before!r}")
    return job_listing.JobFilter(
        statuses=tuple(each for each in STATUSES if each in (statuses or SHOWN_FIRST)),
        lanes=tuple(each for each in LANES if each == lane) or LANES,
        domain=domain or None,
        user_id=user or None,
        before=int(before) if before else None,
    )


def _query(shown: job_listing.JobFilter) -> list[tuple[str, Any]]:
    """The query string of this filter, without the page."""
    query: list[tuple[str, Any]] = [("status", status) for status in shown.statuses]
    if len(shown.lanes) == 1:
        query.append(("lane", shown.lanes[0]))
    if shown.domain:
        query.append(("domain", shown.domain))
    if shown.user_id:
        query.append(("user", shown.user_id))
    return query


class DomainQueue(NamedTuple):
    domain: str
    # Some live worker can make it; why each one that cannot make it cannot.
    enabled: bool
    disabled_reasons: list[registry.DisabledReason]
    lanes: dict[str, job_listing.LaneAtAGlance]


def _by_domain(glance: list[job_listing.LaneAtAGlance], fleet: registry.Fleet) -> list[DomainQueue]:
    domains: dict[str, DomainQueue] = {}
    for lane in glance:
        row = domains.setdefault(
            lane.domain,
            DomainQueue(
                lane.domain, fleet.can_make(lane.domain), fleet.disabled_reasons(lane.domain), {}
            ),
        )
        row.lanes[lane.lane] = lane
    return list(domains.values())
