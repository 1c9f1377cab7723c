"""The proof policy: gold passes all, the planted bug breaks all (or at least one), nothing
inconclusive or empty is ever accepted, and reasons a reviewer understands."""

from __future__ import annotations

import pytest

from core.domains import Domain, Language, SabotagePolicy
from qa.policy import judge_gold, judge_sabotage, needs_proof
from qa.results import Outcome, ProofRun, TestResult, proof_run


def run(*outcomes: Outcome, problem: str | None = None) -> ProofRun:
    tests = [
        TestResult(
            id=f"test_{i}", outcome=outcome, message="assert 1 == 2" if outcome == "failed" else ""
        )
        for i, outcome in enumerate(outcomes, start=1)
    ]
    return proof_run(
        language="python",
        trust="untrusted",
        confinement="bubblewrap",
        command="pytest",
        duration_s=0.5,
        log="",
        tests=tests,
        problem=problem,
    )


def test_gold_passing_every_test_is_accepted() -> None:
    verdict = judge_gold(run("passed", "passed"))

    assert verdict.accepted
    assert verdict.reason == "gold passed all 2 tests"


def test_gold_failing_tests_is_refused_naming_them() -> None:
    verdict = judge_gold(run("passed", "failed", "failed", "passed", "passed"))

    assert not verdict.accepted
    assert verdict.reason == (
        "gold failed 2 of 5 tests: test_2 (assert 1 == 2); test_3 (assert 1 == 2)"
    )


def test_gold_skipping_or_erroring_is_not_passing() -> None:
    verdict = judge_gold(run("passed", "skipped", "errored"))

    assert not verdict.accepted
    assert verdict.reason == "gold did not pass 2 of 3 tests: test_2; test_3"


def test_a_long_list_of_tests_is_cut_short() -> None:
    failures: list[Outcome] = ["failed"] * 8
    verdict = judge_gold(run(*failures))

    assert verdict.reason.endswith("test_5 (assert 1 == 2); and 3 more")


@pytest.mark.parametrize("must_fail", ["all", "at_least_one"])
def test_a_bug_that_breaks_every_test_is_accepted(must_fail: SabotagePolicy) -> None:
    verdict = judge_sabotage(run("failed", "errored", "failed"), must_fail)

    assert verdict.accepted


@pytest.mark.parametrize("must_fail", ["all", "at_least_one"])
def test_a_bug_that_breaks_nothing_is_refused(must_fail: SabotagePolicy) -> None:
    verdict = judge_sabotage(run("passed", "passed", "passed", "passed"), must_fail)

    assert verdict == judge_sabotage(run("passed", "passed", "passed", "passed"), "all")
    assert verdict.reason == "the planted bug broke nothing: 0 of 4 tests failed"


def test_a_bug_that_breaks_some_tests_depends_on_the_domain() -> None:
    some = run("failed", "passed", "skipped")

    relaxed = judge_sabotage(some, "at_least_one")
    strict = judge_sabotage(some, "all")

    assert relaxed.accepted
    assert relaxed.reason == "the planted bug broke 1 of 3 tests (at least one must fail)"
    assert not strict.accepted
    assert strict.reason == (
        "the planted bug broke only 1 of 3 tests (every test must fail); "
        "still passing or skipped: test_2; test_3"
    )


def test_an_inconclusive_run_is_never_accepted() -> None:
    timed_out = run(problem="timed out after 20 s")

    for verdict in (
        judge_gold(timed_out),
        judge_sabotage(timed_out, "all"),
        judge_sabotage(timed_out, "at_least_one"),
    ):
        assert verdict == verdict.__class__(
            accepted=False, reason="inconclusive: timed out after 20 s"
        )


def test_no_test_run_is_a_failure() -> None:
    empty = run()

    assert not empty.conclusive
    assert not judge_gold(empty).accepted
    assert not judge_sabotage(empty, "at_least_one").accepted
    assert judge_gold(empty).reason == "inconclusive: no test ran (the runner reported no test)"


@pytest.mark.parametrize(("language", "proven"), [("python", True), ("sql", True), ("none", False)])
def test_missions_without_code_go_to_a_person(language: Language, proven: bool) -> None:
    domain = Domain(name="d", kind="technical", language=language, target=1, retire_after=100)

    assert needs_proof(domain) is proven
