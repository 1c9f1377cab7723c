"""warmpool processes for acceptance tests: real `python -m server ...` processes on the test
database, and API keys for them."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx

from server.auth import ROLES, Role, create_key
from tests.support.polling import until

ROOT = Path(__file__).resolve().parents[2]

# A map under which a worker makes nothing by itself: one domain, no stock to keep.
QUIET_MAP = """\
tracks:
  marketing-manager: [marketing-copy]
domains:
  marketing-copy:
    kind: non_technical
    language: none
    target: 0
"""


async def create_keys(database_url: str) -> dict[Role, str]:
    connection = await asyncpg.connect(database_url)
    try:
        return {role: await create_key(connection, role, f"test-{role}") for role in ROLES}
    finally:
        await connection.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


WORKER_NUMBERS = itertools.count()


def environment(database_url: str, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WARMPOOL_", "OPENAI_"))
    }
    env.update(
        WARMPOOL_DATABASE_URL=database_url,
        WARMPOOL_DOMAIN_MAP=str(ROOT / "domain_map.yaml"),
        # A name of its own for each process's worker: a name is refused while one holds it.
        WARMPOOL_WORKER_NAME=f"test-worker-{next(WORKER_NUMBERS)}-{os.getpid()}",
        # A test's processes stop within a second of SIGTERM, releasing what still runs.
        WARMPOOL_SHUTDOWN_GRACE_SECONDS="1",
        PYTHONUNBUFFERED="1",
    )
    env.update(overrides or {})
    return env


@dataclass
class Process:
    popen: subprocess.Popen[bytes]
    log: Path

    def stop(self, signum: int = signal.SIGTERM, wait: float = 15) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signum)
        try:
            return self.popen.wait(wait)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait(5)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def spawn(
    arguments: list[str], env: dict[str, str], log: Path, *, stdout: Path | None = None
) -> Process:
    """The command, its output written to `log`; with `stdout`, only stderr (the log stream)
    goes to `log` and stdout goes there."""
    with ExitStack() as files:
        err = files.enter_context(log.open("wb"))
        out = files.enter_context(stdout.open("wb")) if stdout else err
        popen = subprocess.Popen(arguments, cwd=ROOT, env=env, stdout=out, stderr=err)
    return Process(popen, log)


@contextmanager
def running_server(
    database_url: str,
    log_dir: Path,
    *,
    worker: bool = False,
    overrides: Mapping[str, str] | None = None,
    ready_within: float = 30,
) -> Iterator[str]:
    port = free_port()
    arguments = [sys.executable, "-m", "server", "serve", "--port", str(port)]
    if not worker:
        arguments.append("--no-worker")
    process = spawn(arguments, environment(database_url, overrides), log_dir / f"serve-{port}.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, ready_within)
        yield url
    finally:
        process.stop()


def wait_ready(url: str, process: Process, timeout: float = 30) -> None:
    def ready() -> bool:
        if process.popen.poll() is not None:
            raise RuntimeError(f"the server exited early:\n{process.output()}")
        try:
            return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        until(ready, timeout, "the server to become ready")
    except AssertionError:
        raise RuntimeError(f"the server did not become ready:\n{process.output()}") from None


async def key_id(pool: asyncpg.Pool, role: Role) -> int:
    found: int = await pool.fetchval("SELECT id FROM api_keys WHERE name = $1", f"test-{role}")
    return found
