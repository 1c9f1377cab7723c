"""Test doubles of the generation step: they sleep, block, crash or hang, and count their calls.

Each makes one real ledger call (purpose `generate`), so the ledger gate is exercised too.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from generation.finisher import Finished
from generation.jobs import ClaimedJob
from generation.ledger import Ledger


class Recording:
    def __init__(self) -> None:
        self.calls: Counter[tuple[int, int]] = Counter()

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        self.calls[(job.id, job.attempt)] += 1
        async with ledger.call("generate", "test", "test-model") as record:
            record.input_tokens, record.output_tokens = 10, 20
            await self.work(job)
        return Finished(status="completed")

    async def work(self, job: ClaimedJob) -> None:
        """What happens during the model call."""


class Sleeping(Recording):
    def __init__(self, min_seconds: float, max_seconds: float, seed: int = 0) -> None:
        super().__init__()
        self._random = random.Random(seed)
        self._range = (min_seconds, max_seconds)

    async def work(self, job: ClaimedJob) -> None:
        await asyncio.sleep(self._random.uniform(*self._range))


class Gated(Recording):
    """Blocks every generation until `release()`; `started` counts those under way."""

    def __init__(self) -> None:
        super().__init__()
        self._gate = asyncio.Event()
        self.started = asyncio.Semaphore(0)

    async def work(self, job: ClaimedJob) -> None:
        self.started.release()
        await self._gate.wait()

    def release(self) -> None:
        self._gate.set()


class Crashing(Recording):
    async def work(self, job: ClaimedJob) -> None:
        raise RuntimeError("the model answered nonsense")


class Holding:
    """A generation that runs until its worker stops it. It makes no model call, so it never
    learns that its job was lost, and its worker holds the job to the end."""

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the worker stops it")


class Lingering:
    """A generation that, once stopped, goes on for a minute (a call under way that will not
    end), until it is stopped again."""

    async def generate(self, job: ClaimedJob, ledger: Ledger) -> Finished:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(60)
        raise AssertionError("unreachable: the worker stops it")
