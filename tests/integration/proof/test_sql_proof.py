"""SQL proofs really run pgTAP, as a role without privileges in a database made for the run:
a correct mission proves, and every way a proof can be empty or broken is refused."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
import pytest

from qa.databases import ProofDatabases, statements
from qa.policy import judge_gold, judge_sabotage
from qa.proof import Prover
from qa.results import Trust
from tests.support.proving import require

ROOT = Path(__file__).resolve().parents[3]

GOLD = {
    "01_schema.sql": (
        "CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, amount numeric NOT NULL);\n"
        "INSERT INTO orders VALUES (1, 'ada', 10), (2, 'ada', 15), (3, 'bob', 7);\n"
    ),
    "02_functions.sql": (
        "CREATE FUNCTION customer_total(who text) RETURNS numeric LANGUAGE sql STABLE AS $$\n"
        "  SELECT coalesce(sum(amount), 0) FROM orders WHERE customer = who\n"
        "$$;\n"
    ),
}
TESTS = {
    "test_totals.sql": (
        "CREATE FUNCTION test_sums_one_customer() RETURNS SETOF TEXT LANGUAGE plpgsql AS $$\n"
        "BEGIN\n"
        "  RETURN NEXT is(customer_total('ada'), 25::numeric, 'ada spent 25');\n"
        "  RETURN NEXT is(customer_total('bob'), 7::numeric, 'bob spent 7');\n"
        "END $$;\n"
        "CREATE FUNCTION test_unknown_customer_spent_nothing() RETURNS SETOF TEXT\n"
        "LANGUAGE plpgsql AS $$\n"
        "BEGIN\n"
        "  RETURN NEXT is(customer_total('eve'), 0::numeric, 'eve spent nothing');\n"
        "END $$;\n"
    )
}
# Counts orders instead of summing them, and forgets the empty case.
SABOTAGED = {
    **GOLD,
    "02_functions.sql": GOLD["02_functions.sql"].replace(
        "coalesce(sum(amount), 0)", "nullif(count(*), 0)"
    ),
}
HARMLESS = {
    **GOLD,
    "02_functions.sql": GOLD["02_functions.sql"].replace(
        "coalesce(sum(amount), 0)", "coalesce(sum(amount), 0.0)"
    ),
}


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
async def test_a_correct_mission_proves(prover: Prover, trust: Trust) -> None:
    require(prover, "sql", trust)
    gold = await prover.run("sql", GOLD, TESTS, trust=trust)
    sabotaged = await prover.run("sql", SABOTAGED, TESTS, trust=trust)

    assert judge_gold(gold).reason == "gold passed all 2 tests"
    assert judge_sabotage(sabotaged, "all").reason == "the planted bug broke all 2 tests"
    assert [test.id for test in gold.tests] == [
        "public.test_sums_one_customer",
        "public.test_unknown_customer_spent_nothing",
    ]
    assert gold.confinement == "database role"
    assert sabotaged.tests[0].message == (
        "not ok 1 - ada spent 25; have: 2; want: 25; not ok 2 - bob spent 7; have: 1; want: 7"
    )


async def test_a_bug_that_breaks_nothing_is_refused(prover: Prover) -> None:
    require(prover, "sql", "untrusted")
    run = await prover.run("sql", HARMLESS, TESTS, trust="untrusted")

    assert judge_sabotage(run, "all").reason == (
        "the planted bug broke nothing: 0 of 2 tests failed"
    )


async def test_a_gold_that_fails_its_own_tests_is_refused(prover: Prover) -> None:
    require(prover, "sql", "untrusted")
    wrong = {"test_totals.sql": TESTS["test_totals.sql"].replace("7::numeric", "8::numeric")}
    run = await prover.run("sql", GOLD, wrong, trust="untrusted")

    assert judge_gold(run).reason == (
        "gold failed 1 of 2 tests: public.test_sums_one_customer "
        "(not ok 2 - bob spent 7; have: 7; want: 8)"
    )


async def test_a_test_that_dies_fails_alone(prover: Prover) -> None:
    require(prover, "sql", "untrusted")
    dying = {
        "test_totals.sql": TESTS["test_totals.sql"]
        + "CREATE FUNCTION test_divides() RETURNS SETOF TEXT LANGUAGE plpgsql AS $$\n"
        "BEGIN RETURN NEXT is(1 / 0, 1, 'cannot'); END $$;\n"
    }
    run = await prover.run("sql", GOLD, dying, trust="untrusted")

    assert (run.passed, run.failed) == (2, 1)
    assert run.tests[0].id == "public.test_divides"
    assert run.tests[0].message == "died: division by zero"


@pytest.mark.parametrize(
    ("solution", "test_file", "reason"),
    [
        pytest.param(GOLD, "", "no test ran: the test files define no function", id="empty"),
        pytest.param(
            GOLD,
            "SELECT 1;\n",
            "no test ran: the test files define no function",
            id="runs-and-defines-nothing",
        ),
        pytest.param(
            {"01_schema.sql": "\\! touch /tmp/warmpool-psql-ran\n"},
            TESTS["test_totals.sql"],
            "the solution file 01_schema.sql failed: syntax error",
            id="psql-meta-command",
        ),
        pytest.param(
            GOLD,
            "CREATE FUNCTION test_x( RETURNS SETOF TEXT;\n",
            "the test file test_totals.sql failed: syntax error",
            id="test-file-syntax-error",
        ),
    ],
)
async def test_a_run_that_proves_nothing_is_refused(
    prover: Prover, solution: dict[str, str], test_file: str, reason: str
) -> None:
    require(prover, "sql", "untrusted")
    run = await prover.run("sql", solution, {"test_totals.sql": test_file}, trust="untrusted")

    assert not run.conclusive
    assert (run.reason or "").startswith(reason)
    assert not judge_gold(run).accepted


async def test_a_test_that_asserts_nothing_fails(prover: Prover) -> None:
    require(prover, "sql", "untrusted")
    silent = {
        "test_totals.sql": "CREATE FUNCTION test_nothing() RETURNS SETOF TEXT LANGUAGE plpgsql "
        "AS $$ BEGIN RETURN; END $$;\n"
    }
    run = await prover.run("sql", GOLD, silent, trust="untrusted")

    assert run.conclusive
    assert run.failed == 1
    assert not judge_gold(run).accepted


async def test_the_run_database_and_role_are_dropped(prover: Prover, postgres_server: str) -> None:
    require(prover, "sql", "untrusted")
    run = await prover.run("sql", GOLD, TESTS, trust="untrusted")
    role = run.command.split("as role ")[1].split()[0]

    admin = await asyncpg.connect(postgres_server)
    try:
        assert not await admin.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", role)
        assert not await admin.fetchval("SELECT count(*) FROM pg_roles WHERE rolname = $1", role)
    finally:
        await admin.close()


async def test_every_statement_for_the_proof_databases_prepares_and_is_used(
    prover: Prover, postgres_server: str
) -> None:
    """What proof_database.sql holds needs pgTAP, so it is checked here rather than against
    warmpool's own schema."""
    require(prover, "sql", "untrusted")
    used = set(re.findall(r'statements\["([a-z_0-9]+)"\]', _qa_sources()))
    assert used == statements.names()
    databases = await ProofDatabases.open(postgres_server, statement_timeout_s=5, connections=1)
    try:
        async with databases.disposable() as (_, connection):
            for name in sorted(statements.names() - {"proof_template_install_pgtap"}):
                await connection.prepare(statements[name])
    finally:
        await databases.close()


def _qa_sources() -> str:
    return "".join(path.read_text() for path in (ROOT / "qa").glob("*.py"))
