"""Whether a mission's proof holds, with a reason a reviewer understands.

The gold must pass every test. The planted bug must break every test, or at least one where
the domain says `sabotage_must_fail: at_least_one`. No test run is a failure, and an
inconclusive run (timed out, crashed, unreadable report, code that did not import) proves
nothing either way, so it is never accepted. Missions of language `none` have no code: they
skip the proof and go to a person.
"""

from __future__ import annotations

import msgspec

from core.domains import Domain, SabotagePolicy
from qa.results import ProofRun, TestResult

NAMED_TESTS = 5


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    accepted: bool
    reason: str


def needs_proof(domain: Domain) -> bool:
    return domain.language != "none"


def judge_gold(run: ProofRun) -> Verdict:
    refused = _unproven(run)
    if refused:
        return refused
    not_passed = [test for test in run.tests if test.outcome != "passed"]
    if not_passed:
        return Verdict(
            accepted=False,
            reason=f"gold {_did_not_pass(not_passed)} {len(not_passed)} of {run.total} tests: "
            f"{_named(not_passed)}",
        )
    return Verdict(accepted=True, reason=f"gold passed all {run.total} tests")


def judge_sabotage(run: ProofRun, must_fail: SabotagePolicy) -> Verdict:
    refused = _unproven(run)
    if refused:
        return refused
    broken = run.failed + run.errored
    if broken == 0:
        return Verdict(
            accepted=False,
            reason=f"the planted bug broke nothing: 0 of {run.total} tests failed",
        )
    if must_fail == "at_least_one":
        return Verdict(
            accepted=True,
            reason=f"the planted bug broke {broken} of {run.total} tests (at least one must fail)",
        )
    if broken < run.total:
        unbroken = [test for test in run.tests if test.outcome in ("passed", "skipped")]
        return Verdict(
            accepted=False,
            reason=f"the planted bug broke only {broken} of {run.total} tests (every test must "
            f"fail); still passing or skipped: {_named(unbroken)}",
        )
    return Verdict(accepted=True, reason=f"the planted bug broke all {run.total} tests")


def _unproven(run: ProofRun) -> Verdict | None:
    if not run.conclusive:
        return Verdict(accepted=False, reason=f"inconclusive: {run.reason}")
    if run.total == 0:
        return Verdict(accepted=False, reason="no test ran")
    return None


def _did_not_pass(tests: list[TestResult]) -> str:
    outcomes = {test.outcome for test in tests}
    if len(outcomes) == 1:
        return {"failed": "failed", "errored": "errored on", "skipped": "skipped"}[outcomes.pop()]
    return "did not pass"


def _named(tests: list[TestResult]) -> str:
    shown = [f"{test.id} ({test.message})" if test.message else test.id for test in tests]
    more = len(shown) - NAMED_TESTS
    return "; ".join(shown[:NAMED_TESTS]) + (f"; and {more} more" if more > 0 else "")
