"""SQL proofs, beyond what every language promises (test_verdicts.py): one test dying fails
alone, psql never runs, a test must assert something, the run database and role go away, the
admin URL's database is closed to other roles, untrusted SQL runs only where its bounds hold,
and nothing added to template1 reaches a proof. What hostile SQL may not do is in
test_hostile.py."""

from __future__ import annotations

import asyncio
import re
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from qa.databases import ProofDatabases, statements
from qa.policy import judge_gold
from qa.proof import Prover
from qa.slots import Slot
from qa.sql_runner import SqlRunner
from tests.support.private_postgres import PrivatePostgres
from tests.support.proof_samples import SQL
from tests.support.proving import require
from tests.support.tools import need, need_command

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
        async with databases.disposable() as run:
            for name in sorted(statements.names() - {"proof_template_install_pgtap"}):
                await run.connection.prepare(statements[name])
    finally:
        await databases.close()


async def _closed_to_others(url: str) -> bool:
    """Whether the database of `url` is closed to PUBLIC and open to the role of `url`."""
    connection = await asyncpg.connect(url)
    try:
        return bool(
            await connection.fetchval(
                "SELECT NOT has_database_privilege('public', current_database(), 'CONNECT') "
                "AND has_database_privilege(current_user, current_database(), 'CONNECT')"
            )
        )
    finally:
        await connection.close()


async def test_concurrent_starts_close_the_admin_database_to_other_roles(
    prover: Prover, database_url: str
) -> None:
    """warmpool's own database, when proofs share its server: several workers start at once."""
    require(prover, "sql", "untrusted")
    opened = await asyncio.gather(
        *(
            ProofDatabases.open(database_url, statement_timeout_s=5, connections=1)
            for _ in range(4)
        ),
        return_exceptions=True,
    )
    for databases in opened:
        if isinstance(databases, ProofDatabases):
            await databases.close()

    assert [type(databases) for databases in opened] == [ProofDatabases] * 4, opened
    assert await _closed_to_others(database_url)


@pytest.fixture
async def owner_url(prover: Prover, database_url: str) -> AsyncIterator[str]:
    """The URL of warmpool's database as its owner, a role that may create roles and databases
    but is no superuser (`prover` has built the pgTAP template, which such a role cannot)."""
    role = f"warmpool_owner_{secrets.token_hex(4)}"
    parts = urlsplit(database_url)
    database = parts.path.lstrip("/")
    admin = await asyncpg.connect(database_url)
    try:
        await admin.execute(f'CREATE ROLE "{role}" LOGIN CREATEDB CREATEROLE')
        await admin.execute(f'ALTER DATABASE "{database}" OWNER TO "{role}"')
        yield parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}").geturl()
    finally:
        await admin.execute(f'ALTER DATABASE "{database}" OWNER TO CURRENT_USER')
        await admin.execute(f'DROP OWNED BY "{role}"')
        await admin.execute(f'DROP ROLE "{role}"')
        await admin.close()


async def test_an_admin_that_is_no_superuser_keeps_its_database_and_proves_trusted_sql_only(
    prover: Prover, owner_url: str, work_root: Path, toolchain_root: Path
) -> None:
    require(prover, "sql", "untrusted")
    async with await Prover.start(
        work_root=work_root,
        toolchain_root=toolchain_root,
        postgres_admin_url=owner_url,
        slots=1,
        bubblewrap=None,
    ) as owned:
        trusted = await owned.run("sql", GOLD, TESTS, trust="trusted")
        untrusted = owned.availability("sql", "untrusted")

    assert judge_gold(trusted).accepted, trusted
    server = urlsplit(owner_url)  # the suite's server: 127.0.0.1:5432, or an embedded one
    assert untrusted == (
        f"untrusted sql proofs need an admin role at {server.hostname or 'localhost'}:"
        f"{server.port or 5432} that may set a role's "
        "temp_file_limit and read the server's /proc to watch a run's memory (a superuser on a "
        "Linux server); refusing to run them unbounded"
    )
    assert await _closed_to_others(owner_url)


@pytest.fixture
def system_postgres() -> Iterator[PrivatePostgres]:
    """A server of the test's own, of the system's PostgreSQL, which has pgTAP."""
    pg_config = need_command("pg_config", "libpq-dev")
    found = {
        option: Path(
            subprocess.run(
                [pg_config, option], capture_output=True, text=True, check=True
            ).stdout.strip()
        )
        for option in ("--bindir", "--sharedir")
    }
    need(
        (found["--sharedir"] / "extension" / "pgtap.control").exists(),
        "the system's PostgreSQL has no pgTAP (Debian package postgresql-<major>-pgtap)",
    )
    server = PrivatePostgres(binaries=found["--bindir"])
    try:
        server.start()
        yield server
    finally:
        server.remove()


async def test_nothing_added_to_template1_reaches_a_proof(system_postgres: PrivatePostgres) -> None:
    planted = await asyncpg.connect(system_postgres.server_url, database="template1")
    try:
        await planted.execute("CREATE TABLE planted_in_template1 (id int)")
    finally:
        await planted.close()
    databases = await ProofDatabases.open(
        system_postgres.server_url, statement_timeout_s=10, connections=2
    )
    try:
        run = await SqlRunner(databases, time_limit_s=10).run(
            GOLD,
            {
                "test_template.sql": "CREATE FUNCTION test_nothing_planted() RETURNS SETOF TEXT "
                "LANGUAGE sql AS $$ SELECT tap.hasnt_table('public', 'planted_in_template1', "
                "'template1 stays out') $$;\n"
            },
            slot=Slot(0, None),
            trust="untrusted",
        )
    finally:
        await databases.close()

    assert (run.passed, run.total) == (1, 1), run


def _qa_sources() -> str:
    return "".join(path.read_text() for path in (ROOT / "qa").glob("*.py"))
