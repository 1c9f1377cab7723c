"""The embedded default: with no database URL, warmpool starts its own PostgreSQL in the data
folder, keeps the data across restarts, and stops the server when it exits; its first start
prints one API key per role, once."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from server.auth import Role
from tests.support.embedded import KEY, postgres_processes, printed_keys, stop_postgres
from tests.support.http import bearer
from tests.support.polling import until
from tests.support.server import Process, environment, free_port, spawn, wait_ready

pytestmark = pytest.mark.slow

START = """
import asyncio, asyncpg
from server import database, migrate
from server.auth import bootstrap_keys
from server.settings import from_environment

async def main():
    settings = from_environment()
    url = await database.resolve_url(settings)
    pool = await database.create_pool(url)
    async with pool.acquire() as connection:
        await migrate.apply(connection)
        print("version", await migrate.current_version(connection))
    print("keys", len(await bootstrap_keys(pool)))
    await pool.close()

asyncio.run(main())
"""

# What uvicorn logs at the end of its graceful shutdown.
SHUT_DOWN = "Application shutdown complete."


def embedded_environment(data_dir: Path) -> dict[str, str]:
    env = environment("unused", {"WARMPOOL_DATA_DIR": str(data_dir)})
    del env["WARMPOOL_DATABASE_URL"]
    return env


def start(data_dir: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", START],
        env=embedded_environment(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Under /tmp, not pytest's private tmp_path: as root, the embedded server runs as its own
    # user, which must reach the data folder.
    folder = Path(tempfile.mkdtemp(prefix="warmpool-embedded-"))
    folder.chmod(0o755)
    yield folder / "data"
    stop_postgres((folder / "data").resolve() / "pgdata")
    shutil.rmtree(folder, ignore_errors=True)


def test_the_embedded_database_starts_keeps_its_data_and_stops(data_dir: Path) -> None:
    first = start(data_dir)
    assert "version" in first
    assert "keys 3" in first, "the first start creates one key per role"
    pgdata = data_dir / "pgdata"
    assert (pgdata / "PG_VERSION").exists()
    assert not (pgdata / "postmaster.pid").exists(), "the server stopped when warmpool exited"

    second = start(data_dir)
    assert "keys 0" in second, "the data, keys included, survived the restart"
    assert not (pgdata / "postmaster.pid").exists()


# A request for each role that its key may make, and the statuses that answer it.
ROLE_CHECKS: dict[Role, tuple[str, str, dict[str, str] | None, set[int]]] = {
    "candidate_app": (
        "POST",
        "/v1/serve",
        {"user_id": "first-start", "track": "marketing-manager"},
        {200, 202},
    ),
    "qa_reviewer": ("GET", "/v1/qa/missions", None, {200}),
    "admin": ("GET", "/v1/queue", None, {200}),
}


@contextmanager
def serving(data_dir: Path, log: Path) -> Iterator[tuple[httpx.Client, Process]]:
    """The real `warmpool serve` on the embedded default, once it is ready."""
    port = free_port()
    arguments = [sys.executable, "-m", "server", "serve", "--port", str(port)]
    process = spawn(arguments, embedded_environment(data_dir), log)
    url = f"http://127.0.0.1:{port}"
    try:
        # The first start also builds the proofs' pgTAP template: seconds on a busy machine.
        wait_ready(url, process, timeout=90)
        with httpx.Client(base_url=url, timeout=10) as client:
            yield client, process
    finally:
        process.stop()


def check_keys(client: httpx.Client, keys: dict[Role, str]) -> None:
    for role, (method, path, body, statuses) in ROLE_CHECKS.items():
        answer = client.request(method, path, json=body, headers=bearer(keys[role]))
        assert answer.status_code in statuses, f"{role} key on {path}: {answer.text}"


def stop_cleanly(process: Process, pgdata: Path) -> None:
    """SIGTERM: a graceful shutdown, exit code 0, and the embedded PostgreSQL stops with it."""
    returncode = process.stop(signal.SIGTERM)
    output = process.output()
    assert returncode == 0, output
    assert SHUT_DOWN in output, output
    assert "Traceback" not in output, output
    until(
        lambda: not postgres_processes(pgdata), 5, "the embedded PostgreSQL to stop with warmpool"
    )
    assert not (pgdata / "postmaster.pid").exists()


def test_serve_prints_one_key_per_role_on_its_first_start_only(
    data_dir: Path, tmp_path: Path
) -> None:
    pgdata = data_dir.resolve() / "pgdata"  # as the product names it
    with serving(data_dir, tmp_path / "first.log") as (client, process):
        keys = printed_keys(process.output())
        check_keys(client, keys)
        for role in ("candidate_app", "qa_reviewer"):
            assert client.get("/v1/queue", headers=bearer(keys[role])).status_code == 403, role
        made_up = "wp_" + "x" * 43
        assert client.get("/v1/queue", headers=bearer(made_up)).status_code == 401
        assert postgres_processes(pgdata), "the embedded PostgreSQL serves the data folder"
        stop_cleanly(process, pgdata)

    with serving(data_dir, tmp_path / "second.log") as (client, process):
        check_keys(client, keys)
        stop_cleanly(process, pgdata)
    assert not KEY.findall(process.output()), "keys are printed on the first start only"
