"""Hostile code, run as untrusted code is: never judged a pass, and the host unharmed. After each
test, the autouse check in conftest.py finds no process of a sandbox uid (not even a zombie),
no process in a slot's cgroup and no run folder left."""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from qa import processes
from qa.databases import ProofDatabases
from qa.policy import judge_gold
from qa.proof import Prover
from qa.results import ProofRun, Trust
from qa.sandbox import RunLimits
from qa.slots import Slot
from qa.sql_runner import SqlRunner
from tests.support.proving import require
from tests.support.tools import need

SOLUTION = {"shop.py": "def price():\n    return 10\n"}


def hostile(body: str) -> dict[str, str]:
    return {"test_shop.py": f"import os, sys, time\nfrom shop import price\n\n{body}"}


def never_a_pass(run: ProofRun) -> None:
    assert not judge_gold(run).accepted, run
    assert not (run.conclusive and run.passed == run.total)


@pytest.mark.parametrize("trust", ["untrusted", "trusted"])
async def test_an_infinite_loop_is_killed_at_the_time_limit(
    hostile_prover: Prover, trust: Trust
) -> None:
    require(hostile_prover, "python", trust)
    spin = hostile("def test_spin():\n    while True:\n        pass\n")
    run = await hostile_prover.run("python", SOLUTION, spin, trust=trust)

    never_a_pass(run)
    assert run.reason == "timed out after 3 s"


async def test_a_fork_bomb_stays_within_the_process_limit(hostile_prover: Prover) -> None:
    require(hostile_prover, "python", "untrusted")
    [uid] = hostile_prover.slot_uids
    assert uid is not None
    most = 0

    async def count() -> None:
        nonlocal most
        while True:
            most = max(most, len(processes.living(uid)))
            await asyncio.sleep(0.05)

    counting = asyncio.create_task(count())
    try:
        run = await hostile_prover.run(
            "python",
            SOLUTION,
            hostile(
                "def test_bomb():\n"
                "    while True:\n"
                "        try:\n"
                "            os.fork()\n"
                "        except OSError:\n"
                "            pass\n"
            ),
            trust="untrusted",
        )
    finally:
        counting.cancel()

    never_a_pass(run)
    assert 1 < most <= RunLimits(wall_s=1, address_space=1).processes


async def test_allocating_past_the_memory_limit_fails(hostile_prover: Prover) -> None:
    require(hostile_prover, "python", "untrusted")
    run = await hostile_prover.run(
        "python",
        SOLUTION,
        hostile("def test_hoard():\n    hoard = bytearray(2 * 1024 * 1024 * 1024)\n"),
        trust="untrusted",
    )

    never_a_pass(run)
    assert [test.message for test in run.tests] == ["MemoryError"], run.reason


@pytest.mark.parametrize("trust", ["untrusted", "trusted"])
async def test_children_each_under_the_memory_limit_are_stopped_together(
    hostile_prover: Prover, trust: Trust
) -> None:
    require(hostile_prover, "python", trust)
    need(bool(hostile_prover.slot_cgroups), "this machine gives the proof slots no cgroups")
    # Three children, each filling all the address space the per-process limit leaves it
    # (about 750 MiB): over 2 GiB together, above the slot's cap of 1 GiB. The test passes if
    # all three hold their hoard at once; it ends as soon as one is killed, and reaps them all.
    hoarders = hostile(
        "import resource, select, signal\n\n"
        "def test_hoard_together():\n"
        "    limit, _ = resource.getrlimit(resource.RLIMIT_AS)\n"
        "    with open('/proc/self/status') as status:\n"
        "        used = next(int(line.split()[1]) * 1024 for line in status\n"
        "                    if line.startswith('VmSize:'))\n"
        "    ready, told = os.pipe()\n"
        "    children = []\n"
        "    for _ in range(3):\n"
        "        children.append(os.fork())\n"
        "        if children[-1] == 0:\n"
        "            hoard = b'x' * (limit - used - 64 * 1024 * 1024)\n"
        "            os.write(told, b'.')\n"
        "            time.sleep(60)\n"
        "            os._exit(len(hoard))\n"
        "    held = 0\n"
        "    while held < 3:\n"
        "        if select.select([ready], [], [], 0.05)[0]:\n"
        "            held += len(os.read(ready, 3))\n"
        "        elif os.waitpid(-1, os.WNOHANG)[0]:\n"
        "            break\n"
        "    for child in children:\n"
        "        try:\n"
        "            os.kill(child, signal.SIGKILL)\n"
        "            os.waitpid(child, 0)\n"
        "        except OSError:\n"
        "            pass\n"
        "    assert held == 3\n"
    )

    run = await hostile_prover.run("python", SOLUTION, hoarders, trust=trust)

    never_a_pass(run)
    assert (run.reason or "").startswith(
        "the run's processes together went over the slot's 1024 MiB memory cap: the kernel killed "
    ), run.reason


async def test_writing_far_more_than_the_workspace_holds_fails(hostile_prover: Prover) -> None:
    require(hostile_prover, "python", "untrusted")
    # 1 GiB in files of 32 MiB, each under the file size limit: four times what a run may write.
    flood = hostile(
        "def test_fill_the_disk():\n"
        "    chunk = b'x' * (16 * 1024 * 1024)\n"
        "    for number in range(32):\n"
        "        with open(f'fill-{number}', 'wb') as file:\n"
        "            file.write(chunk)\n"
        "            file.write(chunk)\n"
    )

    run = await hostile_prover.run("python", SOLUTION, flood, trust="untrusted")

    never_a_pass(run)
    assert run.failed == 1, run.reason
    assert "No space left on device" in run.tests[0].message, run.tests


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    yield server
    server.close()


async def test_no_network_connection_gets_out(
    hostile_prover: Prover, listener: socket.socket
) -> None:
    require(hostile_prover, "python", "untrusted")
    port = listener.getsockname()[1]
    run = await hostile_prover.run(
        "python",
        SOLUTION,
        hostile(
            "import socket\n\n"
            "def test_phone_home():\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        ),
        trust="untrusted",
    )

    never_a_pass(run)
    with pytest.raises(BlockingIOError):
        listener.accept()


async def test_the_servers_secrets_are_out_of_reach(
    hostile_prover: Prover, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(hostile_prover, "python", "untrusted")
    secret = secrets.token_hex(16)
    monkeypatch.setenv("WARMPOOL_PROOF_TEST_SECRET", secret)
    run = await hostile_prover.run(
        "python",
        SOLUTION,
        hostile(
            "def test_steal():\n"
            "    found = [v for v in os.environ.values() if len(v) == 32]\n"
            "    for entry in os.listdir('/proc'):\n"
            "        try:\n"
            "            with open(f'/proc/{entry}/environ', 'rb') as environ:\n"
            "                found.append(environ.read().decode(errors='replace'))\n"
            "        except OSError:\n"
            "            pass\n"
            "    assert 'WARMPOOL_PROOF_TEST_SECRET' in ''.join(found), sorted(os.environ)\n"
        ),
        trust="untrusted",
    )

    never_a_pass(run)
    assert run.failed == 1
    assert secret not in run.log_excerpt
    assert secret not in str(run.tests)


@pytest.fixture
def outside(work_root: Path, toolchain_root: Path) -> Iterator[list[Path]]:
    """Places outside the workspace: a folder open to all, the toolchain, the host's /tmp."""
    open_to_all = work_root / "open-to-all"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    yield [
        open_to_all / "escaped",
        toolchain_root.resolve() / "escaped",
        Path("/tmp") / f"warmpool-escaped-{secrets.token_hex(4)}",
    ]
    shutil.rmtree(open_to_all)


async def test_nothing_is_written_outside_the_workspace(
    hostile_prover: Prover, outside: list[Path]
) -> None:
    require(hostile_prover, "python", "untrusted")
    run = await hostile_prover.run(
        "python",
        SOLUTION,
        hostile(
            "def test_escape():\n"
            "    written = []\n"
            f"    for target in {[str(t) for t in outside]!r}:\n"
            "        try:\n"
            "            with open(target, 'w') as file:\n"
            "                file.write('out')\n"
            "            written.append(target)\n"
            "        except OSError:\n"
            "            pass\n"
            "    assert written\n"
        ),
        trust="untrusted",
    )

    never_a_pass(run)
    assert [target for target in outside if target.exists()] == []


async def test_printing_100_megabytes_is_cut_off(hostile_prover: Prover) -> None:
    require(hostile_prover, "python", "untrusted")
    run = await hostile_prover.run(
        "python",
        SOLUTION,
        hostile(
            "def test_flood():\n"
            "    for _ in range(100):\n"
            "        os.write(1, b'x' * 1024 * 1024)\n"
            "    os.write(2, b'y' * 100 * 1024 * 1024)\n"
        ),
        trust="untrusted",
    )

    never_a_pass(run)
    # Killed at the output cap, long before the time limit, with the start of the flood kept.
    assert run.reason == "printed more than 8 MiB of output"
    assert "x" * 1000 in run.log_excerpt


async def test_a_child_that_outlives_its_parent_is_killed_and_cannot_forge_the_report(
    hostile_prover: Prover,
) -> None:
    require(hostile_prover, "python", "untrusted")
    forged = (
        '<testsuites><testsuite><testcase classname="test_shop" name="test_daemon" '
        'file="test_shop.py"/></testsuite></testsuites>'
    )
    run = await hostile_prover.run(
        "python",
        SOLUTION,
        hostile(
            "def test_daemon():\n"
            "    if os.fork() == 0:\n"
            "        os.setsid()\n"
            "        if os.fork() == 0:\n"
            "            while True:\n"
            "                try:\n"
            "                    with open('.proof/junit.xml', 'w') as report:\n"
            f"                        report.write({forged!r})\n"
            "                except OSError:\n"
            "                    pass\n"
            "                time.sleep(0.001)\n"
            "        os._exit(0)\n"
            "    assert price() == 11\n"
        ),
        trust="untrusted",
    )

    never_a_pass(run)


async def test_javascript_that_never_ends_or_leaves_children_is_cleaned_up(
    hostile_prover: Prover,
) -> None:
    require(hostile_prover, "javascript", "untrusted")
    solution = {"shop.js": "module.exports = { price: () => 10 };\n"}
    spin = {"shop.test.js": "test('spins', () => { while (true) {} });\n"}
    orphan = {
        "shop.test.js": (
            "const { spawn } = require('child_process');\n"
            "const { price } = require('./shop');\n"
            "test('leaves a child', () => {\n"
            "  spawn('sleep', ['60'], { detached: true, stdio: 'ignore' }).unref();\n"
            "  expect(price()).toBe(11);\n"
            "});\n"
        )
    }

    spun = await hostile_prover.run("javascript", solution, spin, trust="untrusted")
    orphaned = await hostile_prover.run("javascript", solution, orphan, trust="untrusted")

    never_a_pass(spun)
    assert spun.reason == "timed out after 3 s"
    never_a_pass(orphaned)


async def test_sql_that_never_ends_is_killed_and_its_database_dropped(
    hostile_prover: Prover, postgres_server: str
) -> None:
    require(hostile_prover, "sql", "untrusted")
    tests = {
        "test_shop.sql": "CREATE FUNCTION test_x() RETURNS SETOF TEXT LANGUAGE sql "
        "AS $$ SELECT tap.pass('x') $$;\n"
    }
    looping = {
        "test_shop.sql": "CREATE FUNCTION test_loop() RETURNS SETOF TEXT LANGUAGE plpgsql "
        "AS $$ BEGIN LOOP END LOOP; END $$;\n"
    }

    sleeping = await hostile_prover.run(
        "sql",
        {"a.sql": "SET statement_timeout = 0;\nSELECT pg_sleep(60);\n"},
        tests,
        trust="untrusted",
    )
    looped = await hostile_prover.run("sql", {"a.sql": "SELECT 1;\n"}, looping, trust="untrusted")

    never_a_pass(sleeping)
    assert sleeping.reason == "timed out after 3 s"
    never_a_pass(looped)
    assert (looped.reason or "").startswith("timed out")
    admin = await asyncpg.connect(postgres_server)
    try:
        for run in (sleeping, looped):
            role = run.command.split("as role ")[1].split()[0]
            assert not await admin.fetchval(
                "SELECT count(*) FROM pg_database WHERE datname = $1", role
            )
            assert not await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role
            )
    finally:
        await admin.close()


async def test_sql_cannot_reach_the_host(hostile_prover: Prover) -> None:
    require(hostile_prover, "sql", "untrusted")
    marker = Path("/tmp") / f"warmpool-sql-escaped-{secrets.token_hex(4)}"
    attempts = {
        "test_shop.sql": (
            "CREATE FUNCTION test_run_a_program() RETURNS SETOF TEXT LANGUAGE plpgsql AS $$ BEGIN\n"
            f"  COPY (SELECT 1) TO PROGRAM 'touch {marker}';\n"
            "  RETURN NEXT tap.pass('ran a program');\n"
            "END $$;\n"
            "CREATE FUNCTION test_read_a_file() RETURNS SETOF TEXT LANGUAGE plpgsql AS $$ BEGIN\n"
            "  RETURN NEXT tap.ok(length(pg_read_file('/etc/passwd')) > 0, 'read a file');\n"
            "END $$;\n"
            "CREATE FUNCTION test_become_superuser() RETURNS SETOF TEXT LANGUAGE plpgsql AS $$ BEGIN\n"
            "  SET SESSION AUTHORIZATION postgres;\n"
            "  RETURN NEXT tap.pass('became postgres');\n"
            "END $$;\n"
        )
    }

    run = await hostile_prover.run("sql", {"a.sql": "SELECT 1;\n"}, attempts, trust="untrusted")

    never_a_pass(run)
    assert run.failed == 3
    assert all(test.message.startswith("died: ") for test in run.tests), run.tests
    assert "permission denied to set session authorization" in run.tests[0].message
    assert "permission denied for function pg_read_file" in run.tests[1].message
    assert "pg_execute_server_program" in run.tests[2].message
    assert not marker.exists()


PASSING_SQL_TEST = {
    "test_shop.sql": "CREATE FUNCTION test_x() RETURNS SETOF TEXT LANGUAGE sql "
    "AS $$ SELECT tap.pass('x') $$;\n"
}


async def gone_and_server_answers(postgres_server: str, run: ProofRun) -> None:
    """The run's database, role and backend are gone, and the server still answers."""
    role = run.command.split("as role ")[1].split()[0]
    admin = await asyncpg.connect(postgres_server)
    try:
        assert await admin.fetchval("SELECT 1") == 1
        for query in (
            "SELECT count(*) FROM pg_database WHERE datname = $1",
            "SELECT count(*) FROM pg_roles WHERE rolname = $1",
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1",
        ):
            assert not await admin.fetchval(query, role), query
    finally:
        await admin.close()


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (
            {"a.sql": "SET work_mem = '1GB';\n"},
            "the solution file a.sql raised work_mem to 1GB (a proof runs with 4MB)",
        ),
        (
            {"a.sql": "SET statement_timeout = 0;\n"},
            "the solution file a.sql raised statement_timeout to 0 (a proof runs with 3000ms)",
        ),
        (
            {"a.sql": "SELECT set_config('max_parallel_workers_per_gather', '8', false);\n"},
            "the solution file a.sql raised max_parallel_workers_per_gather to 8 "
            "(a proof runs with 0)",
        ),
    ],
    ids=["work_mem", "statement_timeout", "parallel_workers"],
)
async def test_sql_that_raises_its_limits_fails_with_the_limit_it_raised(
    hostile_prover: Prover, postgres_server: str, files: dict[str, str], reason: str
) -> None:
    require(hostile_prover, "sql", "untrusted")
    run = await hostile_prover.run("sql", files, PASSING_SQL_TEST, trust="untrusted")

    never_a_pass(run)
    assert run.reason == reason
    await gone_and_server_answers(postgres_server, run)


def hoard_rows(kind: str) -> str:
    """A gigabyte in rows of a kilobyte, too short to be compressed, in a table of `kind`."""
    return (
        f"CREATE {kind} TABLE hoard (filler text);\n"
        "DO $$ BEGIN FOR i IN 1..100 LOOP\n"
        "  INSERT INTO hoard SELECT repeat(md5(random()::text), 32) FROM generate_series(1, 10000);\n"
        "END LOOP; END $$;\n"
    )


DATABASE_BOUND = r"the proof database grew to \d+ MiB, past the 64 MiB a proof may use"
MEMORY_BOUND = r"the proof's backend held \d+ MiB of memory, past the 256 MiB a proof may use"


@pytest.mark.parametrize(
    ("solution", "reason"),
    [
        (hoard_rows("UNLOGGED"), DATABASE_BOUND),
        (hoard_rows("TEMPORARY"), DATABASE_BOUND),
        (
            "SELECT length(string_agg(repeat('x', 1000000), '')) FROM generate_series(1, 900);\n",
            MEMORY_BOUND,
        ),
        (
            # A raised work_mem keeps the whole sort in memory.
            "SET work_mem = '2GB';\n"
            "SELECT count(*) FROM (SELECT md5(g::text) AS h FROM generate_series(1, 5000000) g "
            "ORDER BY h) AS sorted;\n",
            MEMORY_BOUND,
        ),
        (
            "CREATE TABLE numbers AS SELECT g FROM generate_series(1, 300000) AS g;\n"
            "SET max_parallel_workers_per_gather = 4;\n"
            "SET parallel_setup_cost = 0;\n"
            "SET parallel_tuple_cost = 0;\n"
            "SET min_parallel_table_scan_size = 0;\n"
            "SELECT count(*) FROM numbers WHERE length(repeat(md5(g::text), 2000)) > 0;\n",
            r"the proof started \d+ parallel workers, which proofs may not use",
        ),
        (
            # Each table's lock held to the end of the transaction, in the server's one table.
            "DO $$ BEGIN FOR i IN 1..20000 LOOP\n"
            "  EXECUTE format('CREATE TABLE t%s (a int)', i);\n"
            "END LOOP; END $$;\n",
            r"the proof held \d+ locks, past the 1000 a proof may use",
        ),
    ],
    ids=[
        "unlogged_table",
        "temporary_table",
        "aggregate",
        "work_mem_sort",
        "parallel_workers",
        "locks",
    ],
)
async def test_sql_past_a_bound_is_stopped_with_the_reason(
    hostile_prover: Prover, postgres_server: str, solution: str, reason: str
) -> None:
    require(hostile_prover, "sql", "untrusted")
    run = await hostile_prover.run("sql", {"a.sql": solution}, PASSING_SQL_TEST, trust="untrusted")

    never_a_pass(run)
    assert re.fullmatch(reason, run.reason or ""), run.reason
    await gone_and_server_answers(postgres_server, run)


async def test_a_proofs_role_reaches_no_database_but_its_own(
    hostile_prover: Prover, database_url: str
) -> None:
    """Proofs on warmpool's own server (no proof server configured): the admin URL is
    warmpool's database, which a run's role may not enter, nor another run's database."""
    require(hostile_prover, "sql", "untrusted")
    warmpool = urlsplit(database_url).path.lstrip("/")
    databases = await ProofDatabases.open(database_url, statement_timeout_s=3, connections=2)
    try:
        runner = SqlRunner(databases, time_limit_s=3)
        for extension in ("dblink", "postgres_fdw"):
            refused = await runner.run(
                {"a.sql": f"CREATE EXTENSION {extension};\n"},
                PASSING_SQL_TEST,
                slot=Slot(0, None),
                trust="untrusted",
            )
            never_a_pass(refused)
            assert f'permission denied to create extension "{extension}"' in (refused.reason or "")
        async with databases.disposable() as run, databases.disposable() as other:
            # Its one connection given back, so that a second meets the database's own check.
            await run.connection.close()
            for database in (warmpool, other.role):
                with pytest.raises(
                    asyncpg.InsufficientPrivilegeError, match="permission denied for database"
                ):
                    await asyncpg.connect(database_url, user=run.role, database=database)
            own = await asyncpg.connect(database_url, user=run.role, database=run.role)
            await own.close()
    finally:
        await databases.close()
    warmpools = await asyncpg.connect(database_url)
    try:
        assert await warmpools.fetchval("SELECT count(*) FROM generation_jobs") == 0
    finally:
        await warmpools.close()
