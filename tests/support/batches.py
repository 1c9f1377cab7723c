"""Running the generation side with the batch lane in a test: a worker that claims, a pipeline
on the openai provider against the stub, and the batch pass, turned until the queue is empty."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import asyncpg

from core import domains
from generation.budget import Budget
from generation.dispatcher import Dispatcher
from generation.openai import prices
from generation.openai.batches import BatchLane
from generation.openai.provider import Batching, Calls, OpenAIProvider
from generation.pipeline import MissionPipeline
from generation.sweeper import Sweeper
from generation.worker import Worker
from pool import waiting
from tests.support.openai_stub import OpenAIStub
from tests.support.server import ROOT

MODEL = "gpt-4o-mini"
MINUTE = timedelta(minutes=1)


def stub_provider(
    stub: OpenAIStub, *, calls: Calls = "background", batch: Batching = "replenish"
) -> OpenAIProvider:
    """The openai provider on the stub, batching the replenish lane unless told otherwise."""
    return OpenAIProvider(
        api_key="sk-test",
        base_url=stub.base_url,
        model=MODEL,
        prices=prices.load(),
        timeout_seconds=60,
        calls=calls,
        batch=batch,
    )


@dataclass
class BatchRig:
    """One worker of `slots`, its dispatcher under a global cap of `slots`, and the batch pass."""

    pool: asyncpg.Pool
    provider: OpenAIProvider
    slots: int = 60
    batch_size: int = 50
    # 0: a pass sends whatever lines are queued, as one batch or several full ones.
    batch_wait_seconds: float = 0
    budget: Budget | None = None
    # The most jobs generating at once, as the claims saw them.
    claimed: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        pipeline = MissionPipeline(
            db=self.pool,
            provider=self.provider,
            prover=None,
            trust="untrusted",
            domain_map=domains.load(ROOT / "domain_map.yaml"),
            sabotage_tries=1,
            serve_waiting_user=waiting.serve_waiting_user,
        )
        self.worker = Worker(self.pool, pipeline, name="batch-worker", capacity=self.slots)
        self.sweeper = Sweeper(
            self.pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
        )
        self.dispatcher = Dispatcher(
            self.pool,
            self.worker,
            self.sweeper,
            global_cap=self.slots,
            replenish_cap=self.slots,
            budget=self.budget,
        )
        self.lane: BatchLane = self.provider.batch_lane(
            self.pool, size=self.batch_size, wait_seconds=self.batch_wait_seconds
        )

    async def generate(self) -> int:
        """Claim what a claim may take and run it to its end; the number claimed."""
        claimed = await self.dispatcher.run_once()
        assert await self.worker.drain(grace_seconds=60)
        self.claimed.append(len(claimed))
        return len(claimed)

    async def until_drained(self, *, turns: int = 20) -> int:
        """Generate and run batch passes until nothing is pending or generating; the turns."""
        for turn in range(1, turns + 1):
            await self.generate()
            await self.lane.run_once()
            left = await self.pool.fetchval(
                "SELECT count(*) FROM generation_jobs WHERE status IN ('pending', 'generating')"
            )
            if left == 0:
                return turn
        raise AssertionError(f"jobs still pending or generating after {turns} turns")
