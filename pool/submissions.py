"""What a candidate may submit for an instance, and what a grader reads of it.

Only the instance's code files may be replaced; its tests always come from the mission, so
a test file's path, a `conftest.py` or any path the instance lacks is refused by name. The
submission carries what grading runs, in the instance's own rendering: its code with the
candidate's files in place, and the rendering's visible and hidden tests.
"""

from __future__ import annotations

from datetime import timedelta
from fnmatch import fnmatchcase
from pathlib import PurePosixPath
from typing import TypeVar

import asyncpg
import msgspec

from core.ids import Id
from core.sql import Executor, Queries
from core.text import storable
from generation import gradings
from generation.gradings import GradingLimits, Submission
from pool import serving
from qa.grading import hidden_test_ids
from qa.missions import NO_SUBMISSIONS, Mission, MissionSummary, grading_flag
from qa.results import ProofRun

queries = Queries("pool")

MAX_SUBMISSION_BYTES = 512 * 1024
# Files a test runner reads as configuration or tests, whatever the instance holds: a
# submission never brings one in.
_RUNNER_FILES = ("conftest.py", "test_*.py", "*_test.py", "*.test.js", "*.spec.js", "test_*.sql")


class InvalidSubmission(Exception):
    """The files cannot be graded as sent; the message names the path and the rule."""


class InstanceWithoutCode(Exception):
    def __init__(self, instance_id: int) -> None:
        super().__init__(
            f"instance {instance_id} is of a mission without code: there is nothing to grade"
        )


class NoGrader(Exception):
    def __init__(self, language: str, reasons: list[str]) -> None:
        why = "; ".join(reasons) or "no worker is running"
        super().__init__(
            f"no live worker can grade {language} code now, as candidate code runs only in the "
            f"untrusted sandbox ({why}); start a worker that can, then retry"
        )


class Submit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    files: dict[str, str]


class QaInstance(msgspec.Struct, frozen=True, kw_only=True):
    instance: serving.Instance
    variant_id: Id
    bug_summary: str
    grader_hint: str
    # The gold in this instance's rendering: what a grader compares a candidate's fix with.
    gold_files: dict[str, str]


async def submit(
    db: asyncpg.Pool,
    instance_id: int,
    body: Submit,
    *,
    caller: str,
    key: str,
    fingerprint: bytes,
    created_by: int | None,
    made_by: int | None,
    limits: GradingLimits,
    heartbeat_timeout: timedelta,
) -> tuple[Submission, bool]:
    """The submission under `key` (made now: True), queued for grading."""
    row = await _instance_row(db, instance_id, made_by)
    material = _material(row, body.files)
    async with db.acquire() as connection:
        async with connection.transaction():
            if not await gradings.key_seen(connection, caller, key):
                # Refused before anything is made, the key included: it works once a worker can.
                graders = await gradings.live_graders(connection, heartbeat_timeout)
                if material.language not in graders.languages:
                    raise NoGrader(material.language, graders.reasons.get(material.language, []))
            submitted = await gradings.submit(
                connection,
                material,
                caller=caller,
                key=key,
                fingerprint=fingerprint,
                created_by=created_by,
                limits=limits,
            )
        if submitted.created:
            await gradings.wake_graders(connection)
        return await gradings.get(connection, submitted.submission_id), submitted.created


M = TypeVar("M", bound=MissionSummary)


async def with_submissions(db: Executor, missions: list[M]) -> list[M]:
    """The missions with how candidates fare on them, and the flag a reviewer should see."""
    found = await gradings.stats_of_missions(db, [mission.id for mission in missions])
    return [
        msgspec.structs.replace(
            mission,
            submissions=(stats := found.get(mission.id, NO_SUBMISSIONS)),
            flag=grading_flag(stats),
        )
        for mission in missions
    ]


async def for_review(db: Executor, mission: Mission) -> Mission:
    """The mission, and each of its variants, with how candidates fare on them."""
    [shown] = await with_submissions(db, [mission])
    found = await gradings.stats_of_variants(db, mission.id)
    variants = [
        msgspec.structs.replace(variant, submissions=found.get(variant.id, NO_SUBMISSIONS))
        for variant in shown.variants
    ]
    return msgspec.structs.replace(shown, variants=variants)


async def for_grader(db: Executor, instance_id: int) -> QaInstance:
    row = await _instance_row(db, instance_id, None)
    return QaInstance(
        instance=serving.instance_from_row(row),
        variant_id=Id(row["variant_id"]),
        bug_summary=row["bug_summary"],
        grader_hint=row["grader_hint"],
        gold_files=row["gold_files"],
    )


async def _instance_row(db: Executor, instance_id: int, made_by: int | None) -> asyncpg.Record:
    row = await db.fetchrow(queries["instance_with_mission_for_grading"], instance_id, made_by)
    if row is None:
        raise serving.InstanceNotFound(instance_id)
    return row


def _material(row: asyncpg.Record, files: dict[str, str]) -> gradings.Material:
    if row["language"] == "none":
        raise InstanceWithoutCode(row["id"])
    tests: dict[str, str] = row["test_files"]
    code = {path: content for path, content in row["files"].items() if path not in tests}
    _check(files, tests, code)
    proven = None if row["hidden_gold"] is None else msgspec.convert(row["hidden_gold"], ProofRun)
    return gradings.Material(
        instance_id=row["id"],
        mission_id=row["mission_id"],
        user_id=row["user_id"],
        language=row["language"],
        instance_created_at=row["created_at"],
        files=files,
        code_files={**code, **files},
        visible_test_files=tests,
        hidden_test_files=row["hidden_test_files"],
        hidden_test_ids=hidden_test_ids(
            None if proven is None else msgspec.convert(proven, ProofRun)
        ),
    )


def _check(files: dict[str, str], tests: dict[str, str], code: dict[str, str]) -> None:
    if not files:
        raise InvalidSubmission(
            f"files is empty; send the instance's code files you changed: {_listed(code)}"
        )
    for path, content in files.items():
        name = PurePosixPath(path).name
        if path in tests or any(fnmatchcase(name, pattern) for pattern in _RUNNER_FILES):
            raise InvalidSubmission(
                f"{path!r} is a test file: the tests always come from the mission; send only "
                f"the instance's code files ({_listed(code)})"
            )
        if path not in code:
            raise InvalidSubmission(
                f"{path!r} is not a code file of this instance; its code files are {_listed(code)}"
            )
        if not storable(content):
            raise InvalidSubmission(f"{path!r} contains a NUL character; send text without it")
    size = sum(len(path.encode()) + len(content.encode()) for path, content in files.items())
    if size > MAX_SUBMISSION_BYTES:
        raise InvalidSubmission(
            f"the files hold {size} bytes; at most {MAX_SUBMISSION_BYTES} (512 KB) are accepted"
        )


def _listed(files: dict[str, str]) -> str:
    return ", ".join(repr(path) for path in sorted(files)) or "none"
