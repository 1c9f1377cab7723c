"""The review workflow: the queue, a mission in full, and the transitions a reviewer makes.

approve and reject take a mission that awaits review; retire takes any mission not yet
retired, and retire_variant any of its variants not yet retired (a leaked bug, say), which is
never served again while the mission's other variants are. Each is one conditional UPDATE
that records who (the API key's name), when and why; when it changes no row, the mission's
current state says why, and nothing was written.
They take a connection so that the caller can run them inside its own transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from core.sql import Connection, Executor
from core.text import storable
from qa.missions import (
    QA_STATUSES,
    Mission,
    MissionSummary,
    mission_from_row,
    queries,
    summary_from_row,
    variants_of,
)

MAX_NOTE_CHARACTERS = 2000
# The most missions one list answer holds: the queue itself is short, the reviewed history
# is not.
LIST_LIMIT = 500


class ReviewError(Exception):
    """A review request that cannot be carried out; the message says why."""


class MissionNotFound(ReviewError):
    def __init__(self, mission_id: int | str) -> None:
        super().__init__(f"there is no mission {str(mission_id)!r}")


class MissionStateConflict(ReviewError):
    """The mission is not in the state the transition needs (another reviewer may have won)."""

    def __init__(self, mission: Mission, message: str) -> None:
        self.mission = mission
        super().__init__(message)


class VariantNotFound(ReviewError):
    def __init__(self, mission_id: int | str, variant_id: int | str) -> None:
        super().__init__(f"mission {str(mission_id)!r} has no variant {str(variant_id)!r}")


class InvalidReview(ReviewError):
    """A filter, note or reason that cannot be used."""


async def list_missions(
    connection: Executor, *, status: str = "awaiting_review", domain: str | None = None
) -> list[MissionSummary]:
    """Missions in `status` (of `domain`), those a waiting user asked for first, then oldest."""
    if status not in QA_STATUSES:
        raise InvalidReview(f"status must be one of {', '.join(QA_STATUSES)}; got {status!r}")
    rows = await connection.fetch(queries["missions_list"], status, domain, LIST_LIMIT)
    return [summary_from_row(row) for row in rows]


async def get(connection: Executor, mission_id: int) -> Mission:
    row = await connection.fetchrow(queries["mission_by_id"], mission_id)
    if row is None:
        raise MissionNotFound(mission_id)
    return mission_from_row(row, await variants_of(connection, mission_id))


async def approve(
    connection: Connection, mission_id: int, *, reviewer: str, note: str | None = None
) -> Mission:
    query = queries["mission_approve_if_awaiting_review"]
    note = _text(note, "note", required=False)
    return await _transition(connection, query, mission_id, reviewer, note, _approval_refused)


async def reject(connection: Connection, mission_id: int, *, reviewer: str, reason: str) -> Mission:
    query = queries["mission_reject_if_awaiting_review"]
    return await _transition(
        connection, query, mission_id, reviewer, _reason(reason), _rejection_refused
    )


async def retire(connection: Connection, mission_id: int, *, reviewer: str, reason: str) -> Mission:
    query = queries["mission_retire_unless_retired"]
    return await _transition(
        connection, query, mission_id, reviewer, _reason(reason), _retirement_refused
    )


async def retire_variant(
    connection: Connection, mission_id: int, variant_id: int, *, reviewer: str, reason: str
) -> Mission:
    """Retire one variant of the mission; the mission as it is now."""
    text = _reason(reason)
    await connection.execute(queries["mission_lock_before_its_variant"], mission_id)
    retired = await connection.fetchval(
        queries["variant_retire_unless_retired"], mission_id, variant_id, reviewer, text
    )
    mission = await get(connection, mission_id)
    if retired is None:
        variant = next((each for each in mission.variants if each.id == variant_id), None)
        if variant is None:
            raise VariantNotFound(mission_id, variant_id)
        by = f" by {variant.retired_by}" if variant.retired_by else ""
        raise MissionStateConflict(
            mission,
            f"variant {variant.id} of mission {mission.id} was already retired{by} "
            f"({variant.retire_reason})",
        )
    return mission


async def _transition(
    connection: Connection,
    query: str,
    mission_id: int,
    reviewer: str,
    text: str | None,
    refusal: Callable[[Mission], MissionStateConflict],
) -> Mission:
    """One conditional UPDATE; when it changes no row, the mission as it is says why."""
    row = await connection.fetchrow(query, mission_id, reviewer, text)
    if row is None:
        raise refusal(await get(connection, mission_id))
    return mission_from_row(row, await variants_of(connection, mission_id))


def _approval_refused(mission: Mission) -> MissionStateConflict:
    if mission.retired_at is not None and mission.qa_status == "awaiting_review":
        return MissionStateConflict(
            mission,
            f"mission {mission.id} was retired ({mission.retire_reason}); "
            "a retired mission is never served, so it cannot be approved",
        )
    return _not_awaiting_review(mission, "approved")


def _rejection_refused(mission: Mission) -> MissionStateConflict:
    return _not_awaiting_review(mission, "rejected")


def _retirement_refused(mission: Mission) -> MissionStateConflict:
    by = f" by {mission.retired_by}" if mission.retired_by else ""
    return MissionStateConflict(
        mission, f"mission {mission.id} was already retired{by} ({mission.retire_reason})"
    )


def _not_awaiting_review(mission: Mission, action: str) -> MissionStateConflict:
    by = f" by {mission.reviewed_by}" if mission.reviewed_by else ""
    return MissionStateConflict(
        mission,
        f"mission {mission.id} is {mission.qa_status}{by}; "
        f"only a mission awaiting review can be {action}",
    )


def _reason(reason: str) -> str:
    text = _text(reason, "reason", required=True)
    assert text is not None
    return text


def _text(value: str | None, field: str, *, required: bool) -> str | None:
    sent = value or ""
    # The limit is on the text as sent, as the API publishes it, white space at its ends too.
    if len(sent) > MAX_NOTE_CHARACTERS:
        raise InvalidReview(
            f"{field} is {len(sent)} characters long; the limit is {MAX_NOTE_CHARACTERS}"
        )
    text = sent.strip()
    if not text:
        if required:
            raise InvalidReview(f"{field} is empty; say why, in a sentence a colleague will read")
        return None
    if not storable(text):
        raise InvalidReview(f"{field} contains a NUL character (\\x00); write it without one")
    return text
