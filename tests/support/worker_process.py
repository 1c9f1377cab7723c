"""A real worker process with a test generator, for acceptance tests:

    python -m tests.support.worker_process sleep 0.02 0.2
    python -m tests.support.worker_process hang
    python -m tests.support.worker_process sleep 0.2 0.5 hang-for stuck-user
    python -m tests.support.worker_process --cannot-make=sql-data sleep 0 0

It can make every domain of the repository's domain map but those `--cannot-make` names, and
fails a job of one of those as the mission pipeline fails one of a disabled domain. Settings come from the environment, as for `warmpool worker`, and so do logging and the stop
on SIGTERM. Every generation is recorded in the test table `generation_runs` (job, attempt,
pid), which the test creates.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import asyncpg

from generation.finisher import Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.worker import GenerationFailed
from server import database, logs
from server.runtime import WorkerRuntime
from server.settings import from_environment
from tests.support.fleet import capabilities_without
from tests.support.generators import Recording, Sleeping

CANNOT_MAKE = "--cannot-make="
# The reason a test worker gives for a domain it was told it cannot make.
TOLD_NOT_TO = "this test worker was started with --cannot-make"
RUNS_TABLE = """CREATE TABLE IF NOT EXISTS generation_runs (
    job_id bigint NOT NULL, attempt int NOT NULL, pid int NOT NULL, at timestamptz DEFAULT now()
)"""


class RecordedInDatabase(Recording):
    def __init__(self, pool: asyncpg.Pool, inner: Recording, cannot_make: list[str]) -> None:
        super().__init__()
        self._pool = pool
        self._inner = inner
        self._cannot_make = cannot_make

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        await self._pool.execute(
            "INSERT INTO generation_runs (job_id, attempt, pid) VALUES ($1, $2, $3)",
            job.id,
            job.attempt,
            os.getpid(),
        )
        if job.domain in self._cannot_make:
            raise GenerationFailed(f"domain {job.domain} is disabled on this worker: {TOLD_NOT_TO}")
        return await self._inner.generate(job, ledger)


class Hanging(Recording):
    async def work(self, job: ClaimedJob) -> None:
        await asyncio.sleep(3600)


class HangingFor(Recording):
    """Hangs on the jobs of one user, and works as `inner` on the others."""

    def __init__(self, user_id: str, inner: Recording) -> None:
        super().__init__()
        self._user_id = user_id
        self._inner = inner

    async def work(self, job: ClaimedJob) -> None:
        if job.user_id == self._user_id:
            await asyncio.sleep(3600)
        await self._inner.work(job)


def generator(mode: str, arguments: list[str]) -> Recording:
    if mode == "hang":
        return Hanging()
    sleeping = Sleeping(float(arguments[0]), float(arguments[1]), seed=os.getpid())
    if arguments[2:3] == ["hang-for"]:
        return HangingFor(arguments[3], sleeping)
    return sleeping


async def main(arguments: list[str]) -> None:
    settings = from_environment()
    logs.configure(settings)
    assert settings.database_url
    pool = await database.create_pool(settings.database_url)
    cannot_make = [
        each.removeprefix(CANNOT_MAKE) for each in arguments if each.startswith(CANNOT_MAKE)
    ]
    mode, *rest = [each for each in arguments if not each.startswith(CANNOT_MAKE)]
    runtime = WorkerRuntime(
        pool,
        settings.database_url,
        settings,
        RecordedInDatabase(pool, generator(mode, rest), cannot_make),
        capabilities=capabilities_without(cannot_make, TOLD_NOT_TO),
    )
    await runtime.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("worker ready", flush=True)
    await stop.wait()
    await runtime.stop()
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
