"""Waiting, in tests, for a condition that other processes bring about."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def until(check: Callable[[], T | None], within: float, what: str, *, every: float = 0.1) -> T:
    """`eventually` for code that may not await: a thread, or a test outside the event loop."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        time.sleep(every)


async def eventually(
    check: Callable[[], Awaitable[T | None]], within: float, what: str, *, every: float = 0.05
) -> T:
    """The first truthy value of `check()`, polled `every` seconds until `within` have passed
    (so never None)."""
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        await asyncio.sleep(every)


async def eventually_here(
    check: Callable[[], T | None], within: float, what: str, *, every: float = 0.02
) -> T:
    """`eventually` for this process's own state, which its event loop's tasks bring about."""

    async def checked() -> T | None:
        return check()

    return await eventually(checked, within, what, every=every)
