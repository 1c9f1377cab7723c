"""Proving a rendering: the renamed mission must behave exactly as the mission it renames.

The renamed gold passes every test (visible and hidden) and the renamed sabotaged code fails
as the domain's `sabotage_must_fail` asks, as for any mission; and the renamed sabotaged code
fails the very tests that the variant's own proof saw failing, no more and no fewer, visible
and hidden alike, so that renaming changed neither the bug, nor what a candidate must find, nor
how a grading of the rendering reads. A rendering whose proof is not accepted is discarded,
never served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import msgspec

from core.domains import SabotagePolicy
from qa.policy import NAMED_TESTS, judge_gold, judge_sabotage
from qa.proof import Prover
from qa.results import ProofRun, TestResult, Trust

_BROKEN = ("failed", "errored")


class RenderingProof(msgspec.Struct, frozen=True, kw_only=True):
    """A rendering's `proof` column. `sabotage` is the bug's run of the visible tests, with
    the hidden ones too when the variant's proof holds a conclusive run of them."""

    accepted: bool
    reason: str
    gold: ProofRun
    sabotage: ProofRun


async def prove(
    prover: Prover,
    *,
    language: str,
    trust: Trust,
    must_fail: SabotagePolicy,
    gold_files: Mapping[str, str],
    test_files: Mapping[str, str],
    sabotaged_files: Mapping[str, str],
    hidden_test_files: Mapping[str, str],
    reference: ProofRun,
    hidden_reference: ProofRun | None = None,
) -> RenderingProof:
    """Run a rendering's gold and sabotaged code (concurrently, each in a slot of the prover)
    and judge them; `reference` is the unrendered variant's accepted sabotage run, and
    `hidden_reference` its run of the hidden tests, if it has one.

    Two runs, whatever the tests: the gold against every test, and the bug against the visible
    tests and, where the variant's hidden run is conclusive (a bug may crash it: then there is
    nothing to compare), the hidden ones, which must break exactly as they did in the variant's
    two runs. Since the variant's visible run met the domain's policy, the same outcomes meet
    it too."""
    # The hidden tests whose outcomes the bug must repeat.
    hidden: list[TestResult] = []
    if hidden_reference is not None and hidden_reference.conclusive and hidden_test_files:
        hidden = hidden_reference.tests
    bug_tests = {**test_files, **hidden_test_files} if hidden else test_files
    gold, sabotage = await asyncio.gather(
        prover.run(language, gold_files, {**test_files, **hidden_test_files}, trust=trust),
        prover.run(language, sabotaged_files, bug_tests, trust=trust),
    )

    def refused(reason: str) -> RenderingProof:
        return RenderingProof(accepted=False, reason=reason, gold=gold, sabotage=sabotage)

    # With hidden tests in the run, the policy is met through the same outcomes as before.
    verdict = judge_sabotage(sabotage, "at_least_one" if hidden else must_fail)
    for each in (judge_gold(gold), verdict):
        if not each.accepted:
            return refused(each.reason)
    changed = _changes([*reference.tests, *hidden], sabotage.tests)
    if changed:
        return refused(f"the rendering changed which tests the bug fails: {changed}")
    return RenderingProof(
        accepted=True,
        reason=f"gold passed all {gold.total} tests; the bug broke the same "
        f"{sabotage.failed + sabotage.errored} of {sabotage.total} tests as before renaming"
        + (f" ({len(hidden)} of them hidden)" if hidden else ""),
        gold=gold,
        sabotage=sabotage,
    )


def _changes(reference: list[TestResult], rendered: list[TestResult]) -> str:
    """What differs between the tests the two runs ran and saw broken; empty when nothing."""
    before = {test.id: test.outcome in _BROKEN for test in reference}
    after = {test.id: test.outcome in _BROKEN for test in rendered}
    differences = [
        *(f"{test} no longer ran" for test in sorted(before.keys() - after.keys())),
        *(f"{test} ran, which did not before" for test in sorted(after.keys() - before.keys())),
        *(
            f"{test} {'now fails' if after[test] else 'now passes'}"
            for test in sorted(before.keys() & after.keys())
            if before[test] != after[test]
        ),
    ]
    more = len(differences) - NAMED_TESTS
    return "; ".join(differences[:NAMED_TESTS]) + (f"; and {more} more" if more > 0 else "")
