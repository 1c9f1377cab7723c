"""Grading a candidate's fix: the candidate's code against the visible tests, then against the
hidden tests, each in a run of its own in the untrusted sandbox, and the verdict.

Candidate code is hostile. It may read every file it can reach and raise it as an assertion
message, so the two runs never share a workspace: the visible run holds no hidden test, and
of the hidden run only counts are kept (no test id, message, log or problem text of its own),
checked against the hidden tests the gold's proof counted. Code that runs inside the test
runner's process can make the runner report what it likes; each run carries canaries
(qa/canaries.py), tests that must fail, and a run whose canaries did not all fail is judged
`failed`, none of its tests counted as passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping

import msgspec

from qa.canaries import Canaries
from qa.proof import Prover
from qa.results import ProofRun, TestResult, short

# What a hidden run's problem may say: the sandbox's own words for how a run ended, never the
# runner's (which quote the tests). Anything else is an unreadable report.
_HIDDEN_PROBLEMS = (
    ("timed out after", "timed out"),
    ("printed more than", "printed too much output"),
    ("the run's processes together went over", "went over the memory cap"),
    ("the runner ", "was killed"),
    ("no test ran", "ran no test"),
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
    duration_s: float
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
    timed_out = f"the grading timed out after {time_limit_s:g} s"
    none = Counts(0, 0, 0)
    canaries = Canaries(language)

    def ended(
        status: str, visible: Counts, hidden: Counts, tests: list[Graded], error: str | None
    ) -> Verdict:
        return Verdict(
            status=status,
            visible=visible,
            hidden=hidden,
            tests=tests,
            duration_s=round(time.monotonic() - started, 3),
            error=error,
        )

    visible = await _before(
        deadline,
        prover.run(language, code_files, canaries.beside(visible_test_files), trust="untrusted"),
    )
    if visible is None:
        return ended("error", none, none, [], timed_out)
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
    if hidden is None:
        return ended("error", visible_counts, none, shown, timed_out)
    hidden_counts, hidden_problem = _hidden(hidden, expected_hidden, canaries)
    if hidden_problem is not None:
        return ended("error", visible_counts, none, shown, hidden_problem)
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


def _hidden(
    run: ProofRun, expected: list[str] | None, canaries: Canaries
) -> tuple[Counts, str | None]:
    """The hidden run's counts, and why they prove nothing, in words of warmpool's own."""
    if not run.conclusive:
        reason = run.reason or ""
        said = next(
            (words for start, words in _HIDDEN_PROBLEMS if reason.startswith(start)),
            "wrote no readable report",
        )
        return Counts(0, 0, 0), f"the hidden tests' run {said}"
    tests, _ = canaries.apart(run.tests)
    ran = sorted(test.id for test in tests)
    if (expected is not None and ran != expected) or not ran:
        return Counts(0, 0, 0), "the hidden tests' report does not match the mission's hidden tests"
    return _counts(tests), None
