"""The processes of a chaos run: API processes (`python -m server serve --no-worker`) and
workers (`python -m server worker`) of the real command line on one database. Each has a place,
an API port or a worker name, that a new process takes over when the old one is killed or
stopped: a worker's successor shares its machine name, so it reconciles what the dead one held.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from generation.worker import worker_identity
from tests.support.polling import eventually
from tests.support.server import Process, environment, free_port, spawn, wait_ready

START_WITHIN_SECONDS = 60


@dataclass
class Place:
    role: Literal["api", "worker"]
    name: str
    port: int | None = None
    process: Process | None = None
    started: int = 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.popen.pid

    @property
    def worker_id(self) -> str:
        """How the worker in this place names itself in generation_jobs.worker_id."""
        return worker_identity(self.name, socket.gethostname(), self.pid)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Cluster:
    database_url: str
    settings: Mapping[str, str]
    log_dir: Path
    places: list[Place] = field(default_factory=list)

    @classmethod
    def plan(
        cls,
        database_url: str,
        settings: Mapping[str, str],
        log_dir: Path,
        *,
        apis: int,
        workers: int,
    ) -> Cluster:
        places = [Place("api", f"api-{index}", port=free_port()) for index in range(1, apis + 1)]
        places += [Place("worker", f"chaos-worker-{index}") for index in range(1, workers + 1)]
        return cls(database_url, settings, log_dir, places)

    @property
    def apis(self) -> list[Place]:
        return [place for place in self.places if place.role == "api"]

    @property
    def workers(self) -> list[Place]:
        return [place for place in self.places if place.role == "worker"]

    async def start_all(self) -> None:
        for place in self.places:
            self._spawn(place)
        await asyncio.gather(*(self.wait_ready(place) for place in self.places))

    async def replace(self, place: Place) -> None:
        """A new process in this place, ready; the old one must be gone."""
        self._spawn(place)
        await self.wait_ready(place)

    async def kill(self, place: Place) -> float:
        """SIGKILL, then reap the process (a zombie would still look alive to the successor's
        reconcile); returns the moment of the kill."""
        assert place.process is not None
        killed_at = time.monotonic()
        place.process.popen.send_signal(signal.SIGKILL)
        await asyncio.to_thread(place.process.popen.wait)
        return killed_at

    async def terminate(self, place: Place) -> str | None:
        """SIGTERM, as a deploy stops a process (SIGKILL if it takes too long); what was
        wrong with how it ended, if anything."""
        assert place.process is not None
        code = await asyncio.to_thread(place.process.stop, signal.SIGTERM, START_WITHIN_SECONDS)
        # A graceful stop ends in exit code 0, API processes and workers alike.
        if code == 0:
            return None
        return f"{place.name} (pid {place.pid}) exited with {code} on SIGTERM"

    async def stop_all(self) -> list[str]:
        """Stop every process still running; what was wrong with how they ended."""
        running = [
            place for place in self.places if place.process and place.process.popen.poll() is None
        ]
        endings = await asyncio.gather(*(self.terminate(place) for place in running))
        return [ending for ending in endings if ending]

    def exited(self) -> list[str]:
        """Places whose process exited without being told to."""
        return [
            f"{place.name} (pid {place.pid}) exited with {place.process.popen.returncode}"
            for place in self.places
            if place.process is not None and place.process.popen.poll() is not None
        ]

    def _spawn(self, place: Place) -> None:
        place.started += 1
        overrides = dict(self.settings)
        if place.role == "api":
            arguments = ["serve", "--no-worker", "--port", str(place.port)]
        else:
            arguments = ["worker"]
            overrides["WARMPOOL_WORKER_NAME"] = place.name
        place.process = spawn(
            [sys.executable, "-m", "server", *arguments],
            environment(self.database_url, overrides),
            self.log_dir / f"{place.name}.{place.started}.log",
        )

    async def wait_ready(self, place: Place) -> None:
        assert place.process is not None
        if place.role == "api":
            await asyncio.to_thread(wait_ready, place.url, place.process, START_WITHIN_SECONDS)
            return
        process = place.process
        started = f"worker {place.worker_id} started"

        async def started_or_exited() -> bool:
            return started in process.output() or process.popen.poll() is not None

        await eventually(started_or_exited, START_WITHIN_SECONDS, f"{place.name} to start")
        if started not in process.output():
            raise RuntimeError(f"{place.name} did not start:\n{process.output()}")
