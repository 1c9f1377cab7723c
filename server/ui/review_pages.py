"""The review pages: the queue, a mission in full with its variants, and the approve / reject /
retire forms (of a mission or of one variant)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import msgspec
from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect, Template

from generation import gradings
from pool import reviews, submissions
from qa import review
from qa.missions import QA_STATUSES, Mission
from qa.results import ProofRun
from server.auth import Caller
from server.routes.common import check_domain, path_id, variant_path
from server.services import Services
from server.ui import side_by_side
from server.ui.rendering import notify, page
from server.ui.session import HOME


class NoteForm(msgspec.Struct):
    note: str = ""


class ReasonForm(msgspec.Struct):
    reason: str = ""


@get("/")
async def queue_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    status: FromQuery[str] = "awaiting_review",
    domain: FromQuery[str] = "",
) -> Template:
    check_domain(domain or None, services.domain_map)
    listed = await review.list_missions(services.db, status=status, domain=domain or None)
    missions = await submissions.with_submissions(services.db, listed)
    return page(
        request,
        "queue.html",
        reviewer=reviewer,
        missions=missions,
        status=status,
        domain=domain,
        statuses=QA_STATUSES,
        domains=sorted(services.domain_map.domains),
    )


@get("/missions/{mission_id:str}")
async def mission_page(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
) -> Template:
    read = await review.get(services.db, path_id(mission_id, review.MissionNotFound))
    mission = await submissions.for_review(services.db, read)
    unchanged = {
        path: code
        for path, code in mission.gold_files.items()
        if mission.sabotaged_files.get(path) == code
    }
    return page(
        request,
        "mission.html",
        reviewer=reviewer,
        mission=mission,
        changed=side_by_side.compare(mission.gold_files, mission.sabotaged_files),
        unchanged=unchanged,
        runs=_labelled_runs(mission),
        submissions=await gradings.of_mission(services.db, mission.id),
    )


@post("/missions/{mission_id:str}/approve")
async def approve(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    data: URLEncodedBody[NoteForm],
) -> Redirect:
    number = path_id(mission_id, review.MissionNotFound)
    approval = reviews.approve(services.db, number, reviewer=reviewer.name, note=data.note)
    return await _decide(request, number, approval, "approved", then=HOME)


@post("/missions/{mission_id:str}/reject")
async def reject(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    data: URLEncodedBody[ReasonForm],
) -> Redirect:
    number = path_id(mission_id, review.MissionNotFound)
    rejection = reviews.reject(services.db, number, reviewer=reviewer.name, reason=data.reason)
    return await _decide(request, number, rejection, "rejected", then=HOME)


@post("/missions/{mission_id:str}/retire")
async def retire(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    data: URLEncodedBody[ReasonForm],
) -> Redirect:
    number = path_id(mission_id, review.MissionNotFound)
    retirement = reviews.retire(services.db, number, reviewer=reviewer.name, reason=data.reason)
    return await _decide(request, number, retirement, "retired", then=None)


@post("/missions/{mission_id:str}/variants/{variant_id:str}/retire")
async def retire_variant(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    variant_id: FromPath[str],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    data: URLEncodedBody[ReasonForm],
) -> Redirect:
    number, variant = variant_path(mission_id, variant_id)
    retirement = reviews.retire_variant(
        services.db, number, variant, reviewer=reviewer.name, reason=data.reason
    )
    return await _decide(
        request, number, retirement, f"no longer serves variant {variant}", then=None
    )


async def _decide(
    request: Request[Any, Any, Any],
    mission_id: int,
    decision: Awaitable[Mission],
    done: str,
    *,
    then: str | None,
) -> Redirect:
    """Carry out a decision; the answer, good or bad, is a notice on the page it leads to."""
    mission_page_path = f"{HOME}/missions/{mission_id}"
    try:
        mission = await decision
    except (review.MissionStateConflict, review.InvalidReview) as error:
        notify(request, f"Nothing was changed: {error}.", error=True)
        return Redirect(mission_page_path, status_code=303)
    notify(request, f"Mission #{mission.id} “{mission.title}” {done}.")
    return Redirect(then or mission_page_path, status_code=303)


def _labelled_runs(mission: Mission) -> list[tuple[str, ProofRun]]:
    gold = [("Gold", mission.proof.gold)] if mission.proof.gold else []
    tries = [
        (f"Sabotage try {number}", run)
        for number, run in enumerate(mission.proof.sabotage_tries, start=1)
    ]
    hidden = [
        (label, run)
        for label, run in (
            ("Gold, hidden tests", mission.proof.hidden_gold),
            ("Sabotage, hidden tests", mission.proof.hidden_sabotage),
        )
        if run is not None
    ]
    return gold + tries + hidden
