"""Our TAP parser: counts come from the plan and the result lines, never from an exit status."""

from qa import tap

PGTAP_RUN = [
    "    # Subtest: public.test_total()",
    "    ok 1 - sum of prices",
    '    not ok 2 - ten over five\n    # Failed test 2: "ten over five"\n    #         have: 2\n'
    "    #         want: 3",
    "    1..2",
    'not ok 1 - public.test_total\n# Failed test 1: "public.test_total"',
    "1..1",
    "# Looks like you failed 1 test of 1",
]


def test_a_pgtap_run_gives_one_result_with_its_subtest_as_details() -> None:
    stream = tap.parse(PGTAP_RUN)

    assert stream.problem() is None
    assert stream.plan == 1
    [result] = stream.results
    assert (result.ok, result.number, result.description) == (False, 1, "public.test_total")
    assert result.details == [
        "# Subtest: public.test_total()",
        "ok 1 - sum of prices",
        "not ok 2 - ten over five",
        '# Failed test 2: "ten over five"',
        "#         have: 2",
        "#         want: 3",
        "1..2",
        '# Failed test 1: "public.test_total"',
        "# Looks like you failed 1 test of 1",
    ]


def test_directives_mark_results_that_neither_pass_nor_fail() -> None:
    stream = tap.parse(["ok 1 - later # SKIP not yet", "not ok 2 - known # TODO fix", "1..2"])

    assert [(r.ok, r.directive) for r in stream.results] == [(True, "SKIP"), (False, "TODO")]
    assert stream.results[0].description == "later"


def test_a_stream_without_a_plan_may_have_stopped_early() -> None:
    assert tap.parse(["ok 1 - a"]).problem() == (
        "the TAP output has no plan (1..N): it may have stopped early"
    )


def test_a_plan_that_is_not_met_is_a_problem() -> None:
    assert tap.parse(["1..3", "ok 1", "ok 2"]).problem() == (
        "the TAP plan announced 3 tests but 2 reported"
    )


def test_results_out_of_order_are_a_problem() -> None:
    assert tap.parse(["ok 2", "ok 1", "1..2"]).problem() == "the TAP results are out of order"


def test_a_bail_out_is_a_problem() -> None:
    assert tap.parse(["ok 1", "Bail out! database gone", "1..1"]).problem() == (
        "the tests bailed out: database gone"
    )


def test_nothing_printed_is_not_a_pass() -> None:
    stream = tap.parse([])

    assert stream.results == []
    assert stream.problem() is not None
