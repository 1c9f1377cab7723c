"""A reviewer's decision on a mission with what it settles, in one transaction: the users whose
interactive jobs wait on the mission get their instance when it is approved, and their jobs
fail with the reason when it is rejected or retired. The API and the reviewer UI both decide
through here."""

from __future__ import annotations

import asyncpg

from pool import waiting
from qa import review
from qa.missions import Mission


async def approve(db: asyncpg.Pool, mission_id: int, *, reviewer: str, note: str | None) -> Mission:
    async with db.acquire() as connection, connection.transaction():
        mission = await review.approve(connection, mission_id, reviewer=reviewer, note=note)
        await waiting.after_approval(connection, mission_id)
    return mission


async def reject(db: asyncpg.Pool, mission_id: int, *, reviewer: str, reason: str) -> Mission:
    async with db.acquire() as connection, connection.transaction():
        mission = await review.reject(connection, mission_id, reviewer=reviewer, reason=reason)
        await waiting.after_refusal(
            connection, mission_id, f"the mission was rejected in review: {reason}"
        )
    return mission


async def retire(db: asyncpg.Pool, mission_id: int, *, reviewer: str, reason: str) -> Mission:
    async with db.acquire() as connection, connection.transaction():
        mission = await review.retire(connection, mission_id, reviewer=reviewer, reason=reason)
        # Only a job still waiting for review is affected: its mission will never be served.
        await waiting.after_refusal(
            connection, mission_id, f"the mission was retired before approval: {reason}"
        )
    return mission


async def retire_variant(
    db: asyncpg.Pool, mission_id: int, variant_id: int, *, reviewer: str, reason: str
) -> Mission:
    """One leaked bug out of service; the mission serves its other variants, and no job waits on
    a variant, so nothing else is settled."""
    async with db.acquire() as connection, connection.transaction():
        return await review.retire_variant(
            connection, mission_id, variant_id, reviewer=reviewer, reason=reason
        )
