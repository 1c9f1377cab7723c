"""Grading a candidate's fix: the candidate's code against the visible tests, then against the
hidden tests, each in a run of its own in the untrusted sandbox, and the verdict.

Candidate code is hostile. It may read every file it can reach and raise it as an assertion
message, so the two runs never share a workspace: the visible run holds no hidden test, and
of the hidden run only counts are kept (no test id, message, log or problem text of its own),
checked against the hidden tests the gold's proof counted. Nothing else of the hidden run
reaches the candidate: not its time (`duration_s` is the visible run's, in whole seconds), not
why it proved nothing (one sentence for every cause). Code that runs inside the test
runner's process can make the runner report what it likes; each run carries canaries
(qa/canaries.py), tests that must fail, and a run whose canaries did not all fail is judged
`failed`, none of its tests counted as passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from math import ceil

import msgspec

from qa.canaries import Canaries
from qa.proof import Prover
from qa.results import ProofRun, TestResult, short

# Whatever ended the hidden run early (a timeout, a cap, a crash, a report that does not
# match): code that chose among them could say which, one grading at a time.
HIDDEN_PROVED_NOTHING = (
    "the hidden tests' run proved nothing: it timed out, went over a cap, crashed or wrote no "
    "report of the mission's hidden tests"
)


class Counts(msgspec.Struct, frozen=True):
    passed: int
    failed: int
    total: int


class Graded(msgspec.Struct, frozen=True):
    id: str
    outcome: str
    message: str


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    status: str  # passed, failed or error
    visible: Counts
    hidden: Counts
    tests: list[Graded]
    duration_s: int  # the visible run's, in whole seconds rounded up
    error: str | None


def hidden_test_ids(proof_run: ProofRun | None) -> list[str] | None:
    """The hidden tests' ids as the gold's run found them, for checking a hidden report."""
    return None if proof_run is None else sorted(test.id for test in proof_run.tests)


async def grade(
    prover: Prover,
    language: str,
    code_files: Mapping[str, str],
    visible_test_files: Mapping[str, str],
    hidden_test_files: Mapping[str, str],
    expected_hidden: list[str] | None,
    *,
    time_limit_s: float,
) -> Verdict:
    """Raises ProofUnavailable when this machine cannot run untrusted code of `language`.
    Both runs together end within `time_limit_s`: what still runs then is stopped."""
    started = time.monotonic()
    deadline = asyncio.get_running_loop().time() + time_limit_s
    none = Counts(0, 0, 0)
    canaries = Canaries(language)
    visible = await _before(
        deadline,
        prover.run(language, code_files, canaries.beside(visible_test_files), trust="untrusted"),
    )
    visible_s = ceil(time.monotonic() - started)

    def ended(
        status: str, visible: Counts, hidden: Counts, tests: list[Graded], error: str | None
    ) -> Verdict:
        return Verdict(
            status=status,
            visible=visible,
            hidden=hidden,
            tests=tests,
            duration_s=visible_s,
            error=error,
        )

    if visible is None:
        return ended("error", none, none, [], f"the grading timed out after {time_limit_s:g} s")
    visible_tests, _ = canaries.apart(visible.tests)
    shown = [Graded(test.id, test.outcome, short(test.message)) for test in visible_tests]
    visible_counts = _counts(visible_tests)
    if not visible.conclusive:
        # A timeout, a crash, a run over its caps or an unreadable report: the hidden run,
        # which holds the same code, is not worth a slot.
        reason = f"the visible tests' run proves nothing: {visible.reason}"
        return ended("error", visible_counts, none, shown, reason)
    if (forged := canaries.problem(visible.tests)) is not None:
        return ended("failed", _untrusted(visible_counts), none, [], forged)
    if not hidden_test_files:
        reason = "this mission has no hidden tests, so no fix of it can pass"
        return ended("error", visible_counts, none, shown, reason)
    hidden = await _before(
        deadline,
        prover.run(language, code_files, canaries.beside(hidden_test_files), trust="untrusted"),
    )
    hidden_counts = None if hidden is None else _hidden(hidden, expected_hidden, canaries)
    if hidden is None or hidden_counts is None:
        return ended("error", visible_counts, none, shown, HIDDEN_PROVED_NOTHING)
    if (forged := canaries.problem(hidden.tests)) is not None:
        untrusted = (_untrusted(visible_counts), _untrusted(hidden_counts))
        return ended("failed", *untrusted, [], forged)
    if visible_counts.failed or hidden_counts.failed:
        return ended(
            "failed",
            visible_counts,
            hidden_counts,
            shown,
            f"{visible_counts.failed} of {visible_counts.total} visible and "
            f"{hidden_counts.failed} of {hidden_counts.total} hidden tests did not pass",
        )
    return ended("passed", visible_counts, hidden_counts, shown, None)


async def _before(deadline: float, run: Awaitable[ProofRun]) -> ProofRun | None:
    """The run, or None when the grading's time ran out first: the run is then stopped, and
    its processes killed (the sandbox does so whatever ends a run), before this returns."""
    try:
        async with asyncio.timeout_at(deadline) as limit:
            return await run
    except TimeoutError:
        if not limit.expired():
            raise
        return None


def _untrusted(counts: Counts) -> Counts:
    """A run whose canaries did not fail says nothing of the code: none of its tests counts as
    passed (and none is shown)."""
    return Counts(0, counts.total, counts.total)


def _counts(tests: list[TestResult]) -> Counts:
    # Skipped counts as not passed: code may skip the tests it cannot pass.
    passed = sum(test.outcome == "passed" for test in tests)
    return Counts(passed, len(tests) - passed, len(tests))


def _hidden(run: ProofRun, expected: list[str] | None, canaries: Canaries) -> Counts | None:
    """The hidden run's counts; None when it proves nothing."""
    if not run.conclusive:
        return None
    tests, _ = canaries.apart(run.tests)
    ran = sorted(test.id for test in tests)
    if (expected is not None and ran != expected) or not ran:
        return None
    return _counts(tests)
