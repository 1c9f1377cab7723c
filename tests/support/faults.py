"""Faults at the driver's edge: a real pool on the real database whose connections fail or hold
chosen statements, picked by a fragment of their SQL, before they reach the server, as a
session broken at that moment or a slow network would. Only statements with parameters (every
named query) pass through here; BEGIN and COMMIT do not."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from server.database import create_pool


@dataclass
class Hold:
    """A held statement waits, once `reached` is set, until `release()`."""

    reached: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def release(self) -> None:
        self.released.set()


@dataclass
class _Rule:
    fragment: str
    error: BaseException | None
    times: int | None  # None: every time
    after_running: bool = False  # the statement ran (and committed, alone): its answer is lost
    hold: Hold | None = None


class Faults:
    def __init__(self) -> None:
        self._rules: list[_Rule] = []
        self.injected = 0

    def fail(
        self,
        fragment: str,
        error: BaseException,
        *,
        times: int | None = 1,
        after_running: bool = False,
    ) -> None:
        """The next `times` statements containing `fragment` raise `error` (None: all), before
        they reach the server or, `after_running`, once the server has run them."""
        self._rules.append(_Rule(fragment, error, times, after_running))

    def hold(self, fragment: str, *, after_running: bool = False) -> Hold:
        """The next statement containing `fragment` waits for the returned hold's release,
        before it reaches the server or, `after_running`, once the server has run it."""
        hold = Hold()
        self._rules.append(_Rule(fragment, None, 1, after_running, hold))
        return hold

    async def pool(self, url: str) -> asyncpg.Pool:
        faults = self

        class FaultyConnection(asyncpg.Connection):
            # Where fetch, fetchrow, fetchval and execute with arguments all pass.
            async def _execute(self, query: str, *arguments: Any, **options: Any) -> Any:
                await faults._strike(query, after_running=False)
                result = await super()._execute(query, *arguments, **options)  # type: ignore[misc]
                await faults._strike(query, after_running=True)
                return result

        return await create_pool(url, connection_class=FaultyConnection)

    async def _strike(self, query: str, *, after_running: bool) -> None:
        for rule in self._rules:
            if rule.fragment not in query or rule.times == 0 or rule.after_running != after_running:
                continue
            if rule.times is not None:
                rule.times -= 1
            self.injected += 1
            if rule.hold is not None:
                rule.hold.reached.set()
                await rule.hold.released.wait()
            if rule.error is not None:
                raise rule.error
            return
