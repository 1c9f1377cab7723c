"""SQL proofs, beyond what every language promises (test_verdicts.py): one test dying fails
alone, psql never runs, a test must assert something, and the run database and role go away."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import asyncpg

from qa.databases import ProofDatabases, statements
from qa.policy import judge_gold
from qa.proof import Prover
from tests.integration.proof.samples import SQL
from tests.support.proving import require

ROOT = Path(__file__).resolve().parents[3]

GOLD = SQL.gold
TESTS = SQL.tests


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


async def test_psql_meta_commands_are_not_run(prover: Prover) -> None:
    require(prover, "sql", "untrusted")
    marker = Path("/tmp") / f"warmpool-psql-ran-{secrets.token_hex(4)}"
    run = await prover.run(
        "sql", {"01_schema.sql": f"\\! touch {marker}\n"}, TESTS, trust="untrusted"
    )

    assert not run.conclusive
    assert (run.reason or "").startswith("the solution file 01_schema.sql failed: syntax error")
    assert not marker.exists()


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
