"""The grading queue's front: a submission admitted under the per-user cap and the depth limit
(or refused with the reason), its idempotency key, the NOTIFY that wakes the graders, and a
submission as the API shows it. The same discipline as generation's admission."""

from __future__ import annotations

from datetime import datetime, timedelta
from math import ceil, inf
from typing import Literal

import asyncpg
import msgspec

from core.idempotency import IdempotencyConflict
from core.ids import Id
from core.sql import Connection, Executor, Queries
from qa.grading import Counts, Graded
from qa.missions import SubmissionStats, unified_diff

queries = Queries("generation", "grading_queries.sql")

GRADINGS_CHANNEL = "warmpool_gradings"
# What 429 and 503 answers tell clients to wait: about one grading.
RETRY_AFTER_SECONDS = 10
SubmissionStatus = Literal["pending", "running", "passed", "failed", "error"]
Files = dict[str, str]


class GradingLimits(msgspec.Struct, frozen=True, kw_only=True):
    user_cap: int
    max_pending: int
    max_per_instance: int
    window_s: float


class GradingUserCapReached(Exception):
    def __init__(self, user_id: str, cap: int) -> None:
        super().__init__(
            f"user {user_id!r} already has {cap} submissions pending or running; wait for one "
            "to be graded"
        )


class InstanceGradingsExhausted(Exception):
    def __init__(self, instance_id: int, limit: int, window_s: float, frees_in_s: float) -> None:
        # When the window lets the oldest of them go.
        self.retry_after = max(1, ceil(frees_in_s))
        super().__init__(
            f"instance {instance_id} was already submitted {limit} times in the last "
            f"{window_s:g} seconds, the most a window allows; retry in {self.retry_after} seconds"
        )


class GradingQueueFull(Exception):
    def __init__(self, pending: int, limit: int) -> None:
        super().__init__(
            f"the grading queue is full ({pending} pending submissions, limit {limit}); retry "
            f"in about {RETRY_AFTER_SECONDS} seconds"
        )


class SubmissionNotFound(Exception):
    def __init__(self, submission_id: str | int) -> None:
        super().__init__(f"no submission with id {str(submission_id)!r}")


class Submission(msgspec.Struct, frozen=True, kw_only=True):
    id: Id
    instance_id: Id
    user_id: str
    status: SubmissionStatus
    queue_position: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    visible_tests: Counts | None
    # Counted, never named or shown.
    hidden_tests: Counts | None
    tests: list[Graded]
    duration_s: int | None
    error: str | None


class Material(msgspec.Struct, frozen=True, kw_only=True):
    """What a grading runs, as the pool made it from the instance: its code with the
    candidate's files in place, its visible tests, and the mission's hidden tests, all in the
    instance's rendering; and the hidden tests' ids that the gold's proof counted."""

    instance_id: int
    mission_id: int
    user_id: str
    language: str
    instance_created_at: datetime
    files: Files
    code_files: Files
    visible_test_files: Files
    hidden_test_files: Files
    hidden_test_ids: list[str] | None


class Submitted(msgspec.Struct, frozen=True):
    submission_id: int
    created: bool


async def submit(
    connection: Connection,
    material: Material,
    *,
    caller: str,
    key: str,
    fingerprint: bytes,
    created_by: int | None,
    limits: GradingLimits,
    now: datetime | None = None,
) -> Submitted:
    """Inside a transaction: the submission under `key`, made now (`created`) or before. Call
    `wake_graders` after the commit of a new one. A refusal raises."""
    await connection.execute(queries["grading_user_lock"], material.user_id)
    seen = await _seen(connection, caller, key, fingerprint)
    if seen is not None:
        return Submitted(seen, created=False)
    row = await connection.fetchrow(
        queries["submission_insert_within_limits"],
        material.instance_id,
        material.mission_id,
        material.user_id,
        material.language,
        material.instance_created_at,
        created_by,
        caller,
        key,
        fingerprint,
        material.files,
        material.code_files,
        material.visible_test_files,
        material.hidden_test_files,
        material.hidden_test_ids,
        limits.user_cap,
        limits.max_pending,
        now,
        limits.max_per_instance,
        limits.window_s,
    )
    assert row is not None
    if row["submission_id"] is not None:
        return Submitted(int(row["submission_id"]), created=True)
    # A twin under the same key by another user's lock (a key names a caller, not a user).
    seen = await _seen(connection, caller, key, fingerprint)
    if seen is not None:
        return Submitted(seen, created=False)
    if row["active"] >= limits.user_cap:
        raise GradingUserCapReached(material.user_id, limits.user_cap)
    if row["recent"] >= limits.max_per_instance:
        raise InstanceGradingsExhausted(
            material.instance_id, limits.max_per_instance, limits.window_s, row["frees_in_s"]
        )
    raise GradingQueueFull(row["pending"], limits.max_pending)


async def key_seen(connection: Executor, caller: str, key: str) -> bool:
    """Whether `key` already names a submission of `caller` (with whatever body)."""
    return await connection.fetchrow(queries["submission_by_key"], caller, key) is not None


async def _seen(connection: Connection, caller: str, key: str, fingerprint: bytes) -> int | None:
    row = await connection.fetchrow(queries["submission_by_key"], caller, key)
    if row is None:
        return None
    if bytes(row["fingerprint"]) != fingerprint:
        raise IdempotencyConflict(key)
    return int(row["id"])


async def wake_graders(connection: Executor) -> None:
    await connection.execute(queries["graders_wake"])


async def get(db: Executor, submission_id: int, *, made_by: int | None = None) -> Submission:
    row = await db.fetchrow(queries["submission_view"], submission_id, made_by)
    if row is None:
        raise SubmissionNotFound(submission_id)
    return _view(row)


async def of_instance(
    db: Executor, instance_id: int, *, made_by: int | None = None, limit: int = 100
) -> list[Submission]:
    rows = await db.fetch(queries["submissions_of_instance"], instance_id, limit, made_by)
    return [_view(row) for row in rows]


async def say_what_worker_grades(
    db: Executor, name: str, worker_id: str, languages: list[str], disabled: dict[str, str]
) -> None:
    """On the worker's own row: the languages it grades, and why not the others."""
    await db.execute(queries["worker_grading_set_if_held"], name, worker_id, languages, disabled)


async def stats_of_missions(db: Executor, mission_ids: list[int]) -> dict[int, SubmissionStats]:
    """Per mission of `mission_ids` with graded submissions: how candidates fare."""
    rows = await db.fetch(queries["submissions_stats_of_missions"], mission_ids)
    return {row["mission_id"]: _stats(row) for row in rows}


async def stats_of_variants(db: Executor, mission_id: int) -> dict[int, SubmissionStats]:
    """Per variant of the mission with graded submissions: how candidates fare on its bug."""
    rows = await db.fetch(queries["submissions_stats_of_variants"], mission_id)
    return {row["variant_id"]: _stats(row) for row in rows}


def _stats(row: asyncpg.Record) -> SubmissionStats:
    return SubmissionStats(
        count=row["count"],
        passed=row["passed"],
        pass_rate=round(row["passed"] / row["count"], 4),
        median_duration_s=row["median_duration_s"],
    )


class Reviewed(msgspec.Struct, frozen=True, kw_only=True):
    """A submission as a reviewer reads it: its verdict and the fix against the served code."""

    id: Id
    instance_id: Id
    user_id: str
    status: SubmissionStatus
    created_at: datetime
    visible_tests: Counts | None
    hidden_tests: Counts | None
    error: str | None
    # path -> unified diff from the served file to the candidate's
    diff: dict[str, str]


async def of_mission(db: Executor, mission_id: int, *, limit: int = 50) -> list[Reviewed]:
    rows = await db.fetch(queries["submissions_of_mission"], mission_id, limit)
    return [
        Reviewed(
            id=Id(row["id"]),
            instance_id=Id(row["instance_id"]),
            user_id=row["user_id"],
            status=row["status"],
            created_at=row["created_at"],
            visible_tests=_counts(row, "visible"),
            hidden_tests=_counts(row, "hidden"),
            error=row["error"],
            diff=unified_diff(
                {path: row["served"].get(path, "") for path in row["files"]}, row["files"]
            ),
        )
        for row in rows
    ]


class InFlight(msgspec.Struct, frozen=True):
    pending: int
    running: int


async def in_flight(db: Executor) -> InFlight:
    row = await db.fetchrow(queries["gradings_in_flight"])
    assert row is not None
    return InFlight(row["pending"], row["running"])


class DomainSignals(msgspec.Struct, frozen=True):
    """How candidates fare in a domain: submissions judged (passed or failed), those that
    passed, and the errors, which judged no fix."""

    graded: int
    passed: int
    errored: int


async def signals_by_domain(db: Executor) -> dict[str, DomainSignals]:
    rows = await db.fetch(queries["grading_signals_by_domain"])
    return {
        row["domain"]: DomainSignals(row["graded"], row["passed"], row["errored"]) for row in rows
    }


# The upper bounds, in seconds, of the buckets of the time from a serve to a passing
# submission: those of submission_pass_time_bucket (migration 0027).
PASS_TIME_BUCKETS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, inf)


class PassTimes(msgspec.Struct, frozen=True):
    """A domain's passing submissions by the time they came after the serve: how many of at
    most each bucket's bound (cumulative, as a histogram counts), and their times' sum."""

    at_most: dict[float, int]
    seconds: float


NO_PASS_TIMES = PassTimes(dict.fromkeys(PASS_TIME_BUCKETS, 0), 0.0)


async def pass_times_by_domain(db: Executor) -> dict[str, PassTimes]:
    found: dict[str, dict[float, tuple[int, float]]] = {}
    for row in await db.fetch(queries["grading_pass_times_by_domain"]):
        found.setdefault(row["domain"], {})[row["le"]] = (row["submissions"], row["seconds"])
    times: dict[str, PassTimes] = {}
    for domain, buckets in found.items():
        so_far, at_most = 0, {}
        for bound in PASS_TIME_BUCKETS:
            so_far += buckets.get(bound, (0, 0.0))[0]
            at_most[bound] = so_far
        times[domain] = PassTimes(at_most, sum(seconds for _, seconds in buckets.values()))
    return times


class GraderStatus(msgspec.Struct, frozen=True):
    languages: frozenset[str]
    # language -> each live worker's reason it cannot grade it
    reasons: dict[str, list[str]]


async def live_graders(
    db: Executor, heartbeat_timeout: timedelta, now: datetime | None = None
) -> GraderStatus:
    """What the live workers can grade, and why each that cannot grade a language cannot."""
    languages: set[str] = set()
    reasons: dict[str, list[str]] = {}
    for row in await db.fetch(queries["graders_live"], heartbeat_timeout, now):
        languages.update(row["grading_languages"])
        for language, reason in row["grading_disabled"].items():
            reasons.setdefault(language, []).append(f"worker {row['name']}: {reason}")
    return GraderStatus(frozenset(languages), reasons)


def _counts(row: asyncpg.Record, prefix: str) -> Counts | None:
    total = row[f"{prefix}_total"]
    if total is None:
        return None
    return Counts(row[f"{prefix}_passed"], total - row[f"{prefix}_passed"], total)


def _view(row: asyncpg.Record) -> Submission:
    return Submission(
        id=Id(row["id"]),
        instance_id=Id(row["instance_id"]),
        user_id=row["user_id"],
        status=row["status"],
        queue_position=row["queue_position"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        visible_tests=_counts(row, "visible"),
        hidden_tests=_counts(row, "hidden"),
        tests=msgspec.convert(row["tests"], list[Graded]),
        # Whole seconds; rows graded before they were kept so are rounded up here.
        duration_s=None if row["duration_s"] is None else ceil(row["duration_s"]),
        error=row["error"],
    )
