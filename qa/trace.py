"""Tracing a leaked text to the instances it came from: the renderings whose fingerprints it
shares (`qa.fingerprints`), best first, and the instances served each.

A rendering is fingerprinted as it is stored (`fingerprint_renderings_of`, by whoever stores
it: never the serve), and a trace first fingerprints any rendering still without (one stored
before tracing existed, or by a path that does not), so it misses none. A
rendering matches when it holds at least MIN_SHARE of the text's fingerprints; its score is
the weight of those it holds (each weighs 1 / how many renderings hold it) over the text's
count, so fingerprints common to many renderings (the mission's tests, say, shared by its
variants) add little and a rendering holding the text alone scores 1. Instances served one
rendering are matches scored alike: the rendering is as far as a text can tell them apart.
"""

from __future__ import annotations

import asyncio
import math
from datetime import datetime

import asyncpg
import msgspec

from core.ids import Id
from core.sql import Executor, Queries
from qa import fingerprints

queries = Queries("qa")

# A megabyte of text, counted as the published document counts it: in characters.
MAX_TEXT_CHARACTERS = 1_000_000
MIN_LINES = 20
MIN_SHARE = 0.5
MAX_RENDERINGS = 20
_BATCH = 200


class InvalidTrace(ValueError):
    """A text that cannot be traced; the message says why."""


class Match(msgspec.Struct, frozen=True, kw_only=True):
    instance_id: Id
    mission_id: Id
    variant_id: Id | None
    user_id: str
    cohort: str | None
    served_at: datetime
    score: float


def texts_of(text: str) -> list[str]:
    """The files of a leaked copy (a JSON object of file texts, as an instance's `files`), or
    the text itself; refused when it is too big or holds fewer than MIN_LINES lines of code."""
    if len(text) > MAX_TEXT_CHARACTERS:
        raise InvalidTrace(
            f"a text to trace holds at most {MAX_TEXT_CHARACTERS} characters, got {len(text)}"
        )
    try:
        files = msgspec.json.decode(text, type=dict[str, str])
    except msgspec.DecodeError:
        files = {"text": text}
    lines = sum(1 for body in files.values() for line in body.splitlines() if line.strip())
    if lines < MIN_LINES:
        raise InvalidTrace(
            f"a text to trace holds at least {MIN_LINES} lines that are not blank, got {lines}:"
            " paste a whole instance or a longer part of one file"
        )
    return list(files.values())


async def fingerprint_renderings_of(connection: Executor, variant_id: int) -> None:
    """Fingerprint a variant's renderings not yet fingerprinted, in the caller's transaction."""
    for row in await connection.fetch(queries["renderings_of_variant_unfingerprinted"], variant_id):
        await _fingerprint(connection, row["id"], row["files"])


async def fingerprint_pending(db: asyncpg.Pool) -> int:
    """Fingerprint every rendering not yet fingerprinted; how many were."""
    done = 0
    while batch := await db.fetch(queries["renderings_unfingerprinted"], _BATCH):
        for row in batch:
            async with db.acquire() as connection, connection.transaction():
                await _fingerprint(connection, row["id"], row["files"])
        done += len(batch)
    return done


async def _fingerprint(connection: Executor, rendering_id: int, files: dict[str, str]) -> None:
    hashes = await asyncio.to_thread(fingerprints.of_files, files.values())
    await connection.execute(queries["rendering_fingerprints_insert"], rendering_id, list(hashes))
    await connection.execute(queries["rendering_mark_fingerprinted"], rendering_id)


async def trace(db: asyncpg.Pool, text: str) -> list[Match]:
    hashes = await asyncio.to_thread(fingerprints.of_files, texts_of(text))
    if not hashes:
        return []
    await fingerprint_pending(db)
    renderings = await db.fetch(
        queries["renderings_sharing_fingerprints"],
        list(hashes),
        math.ceil(MIN_SHARE * len(hashes)),
        MAX_RENDERINGS,
    )
    scores = {row["rendering_id"]: row["weight"] / len(hashes) for row in renderings}
    instances = await db.fetch(queries["instances_of_renderings"], list(scores))
    matches = [
        Match(
            instance_id=Id(row["id"]),
            mission_id=Id(row["mission_id"]),
            variant_id=Id.of(row["variant_id"]),
            user_id=row["user_id"],
            cohort=row["cohort"],
            served_at=row["created_at"],
            score=round(scores[row["rendering_id"]], 4),
        )
        for row in instances
    ]
    # Python's sort is stable: instances of one rendering stay in the order they were served.
    return sorted(matches, key=lambda match: -match.score)
