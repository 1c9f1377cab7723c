"""`warmpool worker` processes with the real openai provider pointed at the OpenAI stub, for
acceptance tests of model calls that outlive their worker; killed at the end."""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

from generation.worker import worker_identity
from tests.support.openai_stub import OpenAIStub
from tests.support.polling import eventually
from tests.support.server import Process, environment, spawn


class StubWorkers:
    """Workers in background mode on a short tick and heartbeat timeout, with `settings` on
    top, making the domains of `domain_map` (YAML text)."""

    def __init__(
        self,
        stub: OpenAIStub,
        tmp_path: Path,
        domain_map: str,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self._stub = stub
        self._tmp_path = tmp_path
        self._domain_map = tmp_path / "stub-workers.yaml"
        self._domain_map.write_text(domain_map)
        self._settings = dict(settings or {})
        self.started: list[Process] = []

    async def start(self, database_url: str, name: str) -> Process:
        env = environment(
            database_url,
            {
                "OPENAI_API_KEY": "sk-test",
                "OPENAI_BASE_URL": self._stub.base_url,
                "WARMPOOL_OPENAI_CALLS": "background",
                "WARMPOOL_DOMAIN_MAP": str(self._domain_map),
                "WARMPOOL_WORKER_NAME": name,
                "WARMPOOL_TICK_SECONDS": "0.5",
                "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS": "2",
                **self._settings,
            },
        )
        log = self._tmp_path / f"worker-{len(self.started)}.log"
        process = spawn([sys.executable, "-m", "server", "worker"], env, log)
        self.started.append(process)
        line = f"worker {worker_identity(name, socket.gethostname(), process.popen.pid)} started"

        async def up() -> bool:
            assert process.popen.poll() is None, f"the worker exited:\n{process.output()}"
            return line in process.output()

        await eventually(up, 90, "the worker to start")
        return process

    def stop_all(self) -> None:
        for process in self.started:
            process.stop(signal.SIGKILL)
