"""Users waiting on a review: an interactive job's mission goes to review, and its user gets
an instance when a reviewer approves it; a rejection fails the job with the reviewer's reason."""

from __future__ import annotations

from core.sql import Connection
from generation import review_settlement
from pool import serving


async def serve_waiting_user(connection: Connection, mission_id: int, job_id: int) -> int | None:
    """The instance id of `mission_id` served to the user whose interactive job is `job_id`."""
    instance = await serving.serve_to_waiting_user(connection, mission_id=mission_id, job_id=job_id)
    return None if instance is None else instance.id


async def after_approval(connection: Connection, mission_id: int) -> None:
    """In the approval's transaction: serve and complete every job waiting on the mission."""
    for job_id in await review_settlement.awaiting_review_of(connection, mission_id):
        instance_id = await serve_waiting_user(connection, mission_id, job_id)
        await review_settlement.complete_awaiting_review(connection, job_id, instance_id)


async def after_refusal(connection: Connection, mission_id: int, reason: str) -> None:
    """In the rejection's (or retirement's) transaction: fail the jobs waiting on it."""
    await review_settlement.fail_awaiting_review(connection, mission_id, reason)
