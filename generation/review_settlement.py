"""The interactive jobs that wait on a mission's review: completed with the user's instance
when the mission is approved, failed with the reason when it is rejected or retired."""

from __future__ import annotations

from core.sql import Connection, Queries

queries = Queries("generation")


async def awaiting_review_of(connection: Connection, mission_id: int) -> list[int]:
    """Inside a transaction: the ids of the jobs waiting on this mission's review, locked."""
    rows = await connection.fetch(queries["jobs_awaiting_review_of_mission"], mission_id)
    return [row["id"] for row in rows]


async def complete_awaiting_review(
    connection: Connection, job_id: int, instance_id: int | None
) -> bool:
    done = await connection.fetchval(
        queries["job_complete_if_awaiting_review"], job_id, instance_id
    )
    return done is not None


async def fail_awaiting_review(connection: Connection, mission_id: int, reason: str) -> int:
    failed = await connection.fetch(
        queries["jobs_fail_if_awaiting_review_of_mission"], mission_id, reason
    )
    return len(failed)
