from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.private_postgres import PrivatePostgres
from tests.support.server import Process, environment, spawn


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Starts worker processes with a test generator; kills what is left at the end."""
    started: list[Process] = []

    def start(*generator: str, **overrides: str) -> Process:
        env = environment(
            database_url, {f"WARMPOOL_{key.upper()}": value for key, value in overrides.items()}
        )
        arguments = [sys.executable, "-m", "tests.support.worker_process", *generator]
        process = spawn(arguments, env, tmp_path / f"worker-{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL of the module's own, which its tests may stop and start (an outage)."""
    server = PrivatePostgres()
    server.start()
    yield server
    server.remove()
