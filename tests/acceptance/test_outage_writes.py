"""A short database outage at the worst moment of a generation, the moment its spend and its end
are written: both are written once the database is back, and nothing is lost or failed."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from generation.dispatcher import Dispatcher
from generation.finisher import Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger
from generation.sweeper import Sweeper
from generation.worker import Worker
from server.database import create_pool
from tests.support.jobs import enqueue
from tests.support.polling import eventually
from tests.support.private_postgres import PrivatePostgres

pytestmark = pytest.mark.slow
MINUTE = timedelta(minutes=1)


class OutageMidCall:
    """A generation whose model call ends while the database is away."""

    def __init__(self, private_postgres: PrivatePostgres) -> None:
        self._postgres = private_postgres
        self.database_stopped = asyncio.Event()

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        async with ledger.call("generate", "test", "test-model") as record:
            record.input_tokens, record.output_tokens = 11, 22
            await asyncio.to_thread(self._postgres.stop)
            self.database_stopped.set()
        return Finished(status="completed")


async def test_the_spend_and_the_end_of_a_job_outlast_a_short_outage(
    private_postgres: PrivatePostgres, caplog: pytest.LogCaptureFixture
) -> None:
    if not (private_postgres.data / "postmaster.pid").exists():
        private_postgres.start()
    url = await private_postgres.fresh_database()
    pool = await create_pool(url)
    try:
        job = await enqueue(pool, "user-1")
        generator = OutageMidCall(private_postgres)
        worker = Worker(pool, generator, name="outage", capacity=1)
        sweeper = Sweeper(
            pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
        )
        await Dispatcher(pool, worker, sweeper, global_cap=1, replenish_cap=1).run_once()
        await generator.database_stopped.wait()

        async def retrying() -> bool:
            return "failed, trying again" in caplog.text

        await eventually(retrying, 30, "the writes to fail, and wait")
        await asyncio.to_thread(private_postgres.start)
        assert await worker.drain(grace_seconds=60)
    finally:
        await pool.close()
    connection = await asyncpg.connect(url)
    try:
        status = await connection.fetchval("SELECT status FROM generation_jobs WHERE id = $1", job)
        call = await connection.fetchrow("SELECT * FROM llm_calls WHERE job_id = $1", job)
    finally:
        await connection.close()
    assert status == "completed"
    assert call is not None
    assert (call["outcome"], call["orphaned"], call["input_tokens"], call["output_tokens"]) == (
        "ok",
        False,
        11,
        22,
    )
    assert call["finished_at"] is not None
