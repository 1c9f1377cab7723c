"""What the generation worker and the grader share about the rows they hold: each row is
claimed under an attempt, and every statement about a held row names the attempt, so that one
taken back meanwhile (swept, released) is written by nobody but its new holder."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import asyncpg


class Claim(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def attempt(self) -> int: ...


def fenced(held: Sequence[Claim]) -> tuple[list[int], list[int]]:
    """The ids and the attempts of `held`: the first two arguments of a fenced statement."""
    return [claim.id for claim in held], [claim.attempt for claim in held]


async def heartbeat(
    db: asyncpg.Pool, query: str, held: Sequence[Claim], now: datetime | None
) -> set[int]:
    """Heartbeats `held` through `query`; the ids of those still held under their attempts."""
    return {row["id"] for row in await db.fetch(query, *fenced(held), now)}
