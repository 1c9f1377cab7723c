"""QA review routes (role qa_reviewer): list and read missions, approve, reject and retire them.

`approve`, `reject` and `retire` are the one place each transition commits; the reviewer UI
uses them too.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from core.domains import DomainMap
from pool import waiting
from qa import review
from qa.missions import Mission, MissionSummary
from server.auth import current_caller, requires
from server.errors import BadRequest
from server.routes.common import problems
from server.services import Services


class MissionList(msgspec.Struct):
    missions: list[MissionSummary]


class Approval(msgspec.Struct, forbid_unknown_fields=True):
    note: str | None = None


class Reason(msgspec.Struct, forbid_unknown_fields=True):
    reason: str


async def approve(
    services: Services, mission_id: str, *, reviewer: str, note: str | None
) -> Mission:
    async with services.pool.acquire() as connection, connection.transaction():
        mission = await review.approve(connection, mission_id, reviewer=reviewer, note=note)
        await waiting.after_approval(connection, int(mission.id))
    return mission


async def reject(services: Services, mission_id: str, *, reviewer: str, reason: str) -> Mission:
    async with services.pool.acquire() as connection, connection.transaction():
        mission = await review.reject(connection, mission_id, reviewer=reviewer, reason=reason)
        await waiting.after_refusal(
            connection, int(mission.id), f"the mission was rejected in review: {reason}"
        )
    return mission


async def retire(services: Services, mission_id: str, *, reviewer: str, reason: str) -> Mission:
    async with services.pool.acquire() as connection, connection.transaction():
        mission = await review.retire(connection, mission_id, reviewer=reviewer, reason=reason)
        # Only a job still waiting for review is affected: its mission will never be served.
        await waiting.after_refusal(
            connection, int(mission.id), f"the mission was retired before approval: {reason}"
        )
    return mission


def check_domain(domain: str | None, domain_map: DomainMap) -> None:
    if domain is not None and domain not in domain_map.domains:
        raise BadRequest(
            f"unknown domain {domain!r}; known domains: {', '.join(sorted(domain_map.domains))}"
        )


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
    status: FromQuery[str] = "awaiting_review",
    domain: FromQuery[str | None] = None,
) -> MissionList:
    check_domain(domain, services.domain_map)
    missions = await review.list_missions(services.pool, status=status, domain=domain)
    return MissionList(missions=missions)


@get(
    "/v1/qa/missions/{mission_id:str}",
    guards=[requires("qa_reviewer")],
    responses=problems(400, 401, 403, 404, 503),
    summary="Read a mission in full",
)
async def read_mission(mission_id: FromPath[str], services: NamedDependency[Services]) -> Mission:
    return await review.get(services.pool, mission_id)


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
    reviewer = current_caller(request).name
    return await approve(services, mission_id, reviewer=reviewer, note=data.note)


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
    reviewer = current_caller(request).name
    return await reject(services, mission_id, reviewer=reviewer, reason=data.reason)


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
    reviewer = current_caller(request).name
    return await retire(services, mission_id, reviewer=reviewer, reason=data.reason)
