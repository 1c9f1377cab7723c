"""Operating warmpool: first-start keys, readiness, and the command line."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import asyncpg
from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.auth import bootstrap_keys, key_hash
from tests.support.fleet import standing_worker
from tests.support.http import assert_problem
from tests.support.server import ROOT, environment


async def test_first_start_keys_are_made_once_even_by_processes_starting_together(
    pool: asyncpg.Pool,
) -> None:
    made = await asyncio.gather(*(bootstrap_keys(pool) for _ in range(4)))
    assert sorted(len(keys) for keys in made) == [0, 0, 0, 3]
    [keys] = [keys for keys in made if keys]
    rows = await pool.fetch("SELECT role, key_hash FROM api_keys ORDER BY role")
    assert [row["role"] for row in rows] == ["admin", "candidate_app", "qa_reviewer"]
    assert {bytes(row["key_hash"]) for row in rows} == {key_hash(key) for key in keys.values()}
    assert await bootstrap_keys(pool) == {}


async def test_readiness_says_503_while_the_schema_is_behind(
    client: AsyncTestClient[Litestar], pool: asyncpg.Pool
) -> None:
    assert (await client.get("/readyz")).status_code == 200
    await pool.execute(
        "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)"
    )
    answer = await client.get("/readyz")
    assert_problem(answer, 503, "run 'warmpool migrate'")
    assert answer.headers["retry-after"] == "5"
    assert (await client.get("/healthz")).status_code == 200, "alive all the same"


def warmpool(database_url: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", *arguments],
        cwd=ROOT,
        env=environment(database_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_keys_create_prints_the_key_last_and_stores_only_its_hash(
    database_url: str, pool: asyncpg.Pool
) -> None:
    done = await asyncio.to_thread(
        warmpool, database_url, "keys", "create", "--role", "qa_reviewer", "--name", "alice"
    )
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip().splitlines()[-1]
    row = await pool.fetchrow("SELECT name, role, key_hash FROM api_keys")
    assert row is not None
    assert (row["name"], row["role"], bytes(row["key_hash"])) == (
        "alice",
        "qa_reviewer",
        key_hash(key),
    )
    assert key not in str(await pool.fetch("SELECT * FROM api_keys"))


async def test_status_and_bad_settings_on_the_command_line(database_url: str) -> None:
    await standing_worker(
        database_url,
        "no-pgtap",
        domains=["python-backend", "marketing-copy"],
        disabled={"sql-data": "pgTAP is not installed", "javascript-frontend": "no Node.js"},
    )
    await standing_worker(database_url, "no-node", domains=["python-backend", "sql-data"])
    connection = await asyncpg.connect(database_url)
    try:
        await connection.execute(
            "INSERT INTO llm_batches (status, model, lines, provider_batch_id, provider_status,"
            " completed_lines) VALUES ('submitted', 'gpt-4o-mini', 3, 'batch_abc', 'in_progress', 1)"
        )
    finally:
        await connection.close()
    status = await asyncio.to_thread(warmpool, database_url, "status")
    assert status.returncode == 0, status.stderr
    assert "pending" in status.stdout
    assert "interactive" in status.stdout
    pool_part, _, batch_part = status.stdout.partition("\n\nbatches: ")
    assert batch_part.splitlines() == [
        "1 open, 0 line(s) waiting to go out, 0 job(s) waiting for a line; saved $0.00 by "
        "batching and $0.00 by 0 call(s) taken over",
        " batch provider id                        status       lines  done failed",
        "     1 batch_abc                          in_progress      3     1      0",
    ]
    pool_rows = pool_part.split("pool (")[1].splitlines()
    assert pool_rows[1].split()[:2] == ["domain", "approved"]
    assert pool_rows[1].split()[-1] == "enabled"
    assert [(row.split()[0], row.split()[-1]) for row in pool_rows[2:6]] == [
        ("python-backend", "yes"),
        ("sql-data", "yes"),
        ("javascript-frontend", "no"),
        ("marketing-copy", "yes"),
    ]
    # Why, for each domain that some live worker cannot make.
    assert pool_rows[7:] == [
        "workers that cannot make a domain (enabled: no, when none can)",
        "  sql-data: worker no-pgtap: pgTAP is not installed",
        "  javascript-frontend: worker no-node: not in this worker's domain map; "
        "worker no-pgtap: no Node.js",
        "  marketing-copy: worker no-node: not in this worker's domain map",
    ]
    bad = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "server", "status"],
        cwd=ROOT,
        env=environment(database_url, {"WARMPOOL_GLOBAL_CAP": "many"}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert (
        "WARMPOOL_GLOBAL_CAP='many' is not valid: expected a whole number of at least 1"
        in bad.stderr
    )
