"""Turns, one at a time and spaced: however many callers ask at once, the work they pace takes
at most one turn per `spacing_seconds`, so its share of the process's time is bounded. A caller
waiting for its turn costs nothing; one that asks after a quiet spell goes at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager


class Pacing:
    def __init__(
        self,
        spacing_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._spacing_seconds = spacing_seconds
        self._clock = clock
        self._sleep = sleep
        # Waiters take their turns in the order they came (asyncio's locks are fair).
        self._turn = asyncio.Lock()
        self._next_turn_at = 0.0

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        async with self._turn:
            wait = self._next_turn_at - self._clock()
            if wait > 0:
                await self._sleep(wait)
            self._next_turn_at = self._clock() + self._spacing_seconds
            yield
