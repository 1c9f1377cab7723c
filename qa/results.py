"""What a proof run found, in the shape stored with the mission (JSON) and shown to reviewers.

Counts come only from a runner's machine-readable report. A run whose report cannot be read,
that timed out, crashed or could not import its code is inconclusive: it proves nothing
either way, and `reason` says why.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal, NamedTuple

import msgspec

Trust = Literal["trusted", "untrusted"]
ProofLanguage = Literal["python", "javascript", "sql"]
Outcome = Literal["passed", "failed", "errored", "skipped"]
# How the run was held: bubblewrap (untrusted code), resource limits alone (code that ships
# with warmpool), or a database role without privileges (SQL, which never runs on the host).
Confinement = Literal["bubblewrap", "limits", "database role"]

EXCERPT_CHARACTERS = 4000
MESSAGE_CHARACTERS = 300


class TestResult(msgspec.Struct, frozen=True, kw_only=True):
    __test__ = False  # a result, not a test class for pytest to collect

    id: str
    outcome: Outcome
    message: str = ""


class ProofRun(msgspec.Struct, frozen=True, kw_only=True):
    language: ProofLanguage
    trust: Trust
    confinement: Confinement
    command: str
    conclusive: bool
    reason: str | None
    passed: int
    failed: int
    errored: int
    skipped: int
    total: int
    duration_s: float
    log_excerpt: str
    tests: list[TestResult]


class Reported(NamedTuple):
    """What a runner's report says: the verdict per test, or why it proves nothing."""

    tests: list[TestResult]
    problem: str | None = None


def proof_run(
    *,
    language: ProofLanguage,
    trust: Trust,
    confinement: Confinement,
    command: str,
    duration_s: float,
    log: str,
    tests: list[TestResult],
    problem: str | None,
) -> ProofRun:
    """The run's record; without a problem it is conclusive, provided some test ran."""
    if problem is None and not tests:
        problem = "no test ran (the runner reported no test)"
    counts = Counter(test.outcome for test in tests)
    return ProofRun(
        language=language,
        trust=trust,
        confinement=confinement,
        command=command,
        conclusive=problem is None,
        reason=problem,
        passed=counts["passed"],
        failed=counts["failed"],
        errored=counts["errored"],
        skipped=counts["skipped"],
        total=len(tests),
        duration_s=round(duration_s, 3),
        log_excerpt=excerpt(log),
        tests=tests,
    )


def excerpt(log: str, limit: int = EXCERPT_CHARACTERS) -> str:
    """The start and, mostly, the end of a log: failures and summaries come last."""
    if len(log) <= limit:
        return log
    head = limit // 4
    tail = limit - head
    return f"{log[:head]}\n[... {len(log) - limit} characters left out ...]\n{log[-tail:]}"


def short(message: str, limit: int = MESSAGE_CHARACTERS) -> str:
    """One line of at most `limit` characters."""
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."
