"""Proving a rendering: the renamed mission must behave exactly as the mission it renames.

The renamed gold passes every test (visible and hidden) and the renamed sabotaged code fails
as the domain's `sabotage_must_fail` asks, as for any mission; and the renamed sabotaged code
fails the very tests that the variant's own proof saw failing, no more and no fewer, so that
renaming changed neither the bug nor what a candidate must find. A rendering whose proof is
not accepted is discarded, never served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import msgspec

from core.domains import SabotagePolicy
from qa.policy import NAMED_TESTS, judge_gold, judge_sabotage
from qa.proof import Prover
from qa.results import ProofRun, Trust

_BROKEN = ("failed", "errored")


class RenderingProof(msgspec.Struct, frozen=True, kw_only=True):
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
) -> RenderingProof:
    """Run a rendering's gold and sabotaged code (concurrently, in two of the prover's slots)
    and judge them; `reference` is the unrendered variant's accepted sabotage run."""
    gold, sabotage = await asyncio.gather(
        prover.run(language, gold_files, {**test_files, **hidden_test_files}, trust=trust),
        prover.run(language, sabotaged_files, test_files, trust=trust),
    )
    for verdict in (judge_gold(gold), judge_sabotage(sabotage, must_fail)):
        if not verdict.accepted:
            return RenderingProof(
                accepted=False, reason=verdict.reason, gold=gold, sabotage=sabotage
            )
    changed = _changes(reference, sabotage)
    if changed:
        return RenderingProof(
            accepted=False,
            reason=f"the rendering changed which tests the bug fails: {changed}",
            gold=gold,
            sabotage=sabotage,
        )
    return RenderingProof(
        accepted=True,
        reason=f"gold passed all {gold.total} tests; the bug broke the same "
        f"{sabotage.failed + sabotage.errored} of {sabotage.total} tests as before renaming",
        gold=gold,
        sabotage=sabotage,
    )


def _changes(reference: ProofRun, rendered: ProofRun) -> str:
    """What differs between the tests the two runs ran and saw broken; empty when nothing."""
    before = {test.id: test.outcome in _BROKEN for test in reference.tests}
    after = {test.id: test.outcome in _BROKEN for test in rendered.tests}
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
