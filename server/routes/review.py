"""QA review routes (role qa_reviewer): list and read missions, approve, reject and retire them
(through pool.reviews, as the reviewer UI does)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from pool import reviews, submissions
from qa import review, trace
from qa.missions import QA_STATUSES, Mission, MissionSummary
from server.auth import current_caller, requires
from server.openapi import DOMAINS, OneOf, Text
from server.routes.common import (
    NO_NUL,
    WORDS,
    check_domain,
    path_id,
    problems,
    variant_path,
)
from server.services import Services


class MissionList(msgspec.Struct):
    missions: list[MissionSummary]


class Approval(msgspec.Struct, forbid_unknown_fields=True):
    note: Annotated[str, Text(max_length=review.MAX_NOTE_CHARACTERS, pattern=NO_NUL)] | None = None


class TraceBody(msgspec.Struct, forbid_unknown_fields=True):
    # The byte limit is trace.texts_of's, with its own answer; this only bounds the parse.
    text: Annotated[str, Text(min_length=1, max_length=trace.MAX_TEXT_CHARACTERS)]


class TraceMatches(msgspec.Struct):
    matches: list[trace.Match]


class Reason(msgspec.Struct, forbid_unknown_fields=True):
    reason: Annotated[str, Text(min_length=1, max_length=review.MAX_NOTE_CHARACTERS, pattern=WORDS)]


@get(
    "/v1/qa/missions",
    guards=[requires("qa_reviewer")],
    responses=problems(400, 401, 403, 422, 503),
    summary="List missions for review",
    description=(
        "Missions in one QA status (awaiting_review unless `status` says otherwise), "
        f"those a waiting user asked for first, then the oldest; at most {review.LIST_LIMIT}."
    ),
)
async def list_missions(
    services: NamedDependency[Services],
    status: FromQuery[Annotated[str, OneOf(QA_STATUSES)]] = "awaiting_review",
    domain: FromQuery[Annotated[str, OneOf(DOMAINS)] | None] = None,
) -> MissionList:
    check_domain(domain, services.domain_map)
    missions = await review.list_missions(services.db, status=status, domain=domain)
    return MissionList(missions=await submissions.with_submissions(services.db, missions))


@get(
    "/v1/qa/missions/{mission_id:str}",
    guards=[requires("qa_reviewer")],
    responses=problems(400, 401, 403, 404, 503),
    summary="Read a mission in full",
)
async def read_mission(mission_id: FromPath[str], services: NamedDependency[Services]) -> Mission:
    mission = await review.get(services.db, path_id(mission_id, review.MissionNotFound))
    return await submissions.for_review(services.db, mission)


@post(
    "/v1/qa/missions/{mission_id:str}/approve",
    guards=[requires("qa_reviewer")],
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
    summary="Approve a mission awaiting review",
)
async def approve_mission(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    data: JSONBody[Approval],
) -> Mission:
    number = path_id(mission_id, review.MissionNotFound)
    reviewer = current_caller(request).name
    return await reviews.approve(services.db, number, reviewer=reviewer, note=data.note)


@post(
    "/v1/qa/missions/{mission_id:str}/reject",
    guards=[requires("qa_reviewer")],
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
    summary="Reject a mission awaiting review",
)
async def reject_mission(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    data: JSONBody[Reason],
) -> Mission:
    number = path_id(mission_id, review.MissionNotFound)
    reviewer = current_caller(request).name
    return await reviews.reject(services.db, number, reviewer=reviewer, reason=data.reason)


@post(
    "/v1/qa/missions/{mission_id:str}/retire",
    guards=[requires("qa_reviewer")],
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
    summary="Retire a mission: it is never served again",
)
async def retire_mission(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    services: NamedDependency[Services],
    data: JSONBody[Reason],
) -> Mission:
    number = path_id(mission_id, review.MissionNotFound)
    reviewer = current_caller(request).name
    return await reviews.retire(services.db, number, reviewer=reviewer, reason=data.reason)


@post(
    "/v1/qa/missions/{mission_id:str}/variants/{variant_id:str}/retire",
    guards=[requires("qa_reviewer")],
    status_code=200,
    responses=problems(400, 401, 403, 404, 409, 422, 503),
    summary="Retire one variant of a mission: that bug is never served again",
)
async def retire_variant(
    request: Request[Any, Any, Any],
    mission_id: FromPath[str],
    variant_id: FromPath[str],
    services: NamedDependency[Services],
    data: JSONBody[Reason],
) -> Mission:
    number, variant = variant_path(mission_id, variant_id)
    reviewer = current_caller(request).name
    return await reviews.retire_variant(
        services.db, number, variant, reviewer=reviewer, reason=data.reason
    )


@post(
    "/v1/qa/trace",
    guards=[requires("qa_reviewer")],
    status_code=200,
    responses=problems(400, 401, 403, 422, 503),
    summary="Name the instances a leaked text came from, best match first",
)
async def trace_text(
    services: NamedDependency[Services], data: JSONBody[TraceBody]
) -> TraceMatches:
    return TraceMatches(matches=await trace.trace(services.db, data.text))
