"""Turns: one at a time, in the order asked, spaced apart; at once after a quiet spell."""

from __future__ import annotations

import asyncio
from itertools import pairwise

from server.pacing import Pacing


class Clock:
    """Time that moves only when a turn waits for it."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


async def test_however_many_ask_at_once_the_turns_come_one_at_a_time_and_spaced() -> None:
    clock = Clock()
    pacing = Pacing(0.05, clock=clock, sleep=clock.sleep)
    started: list[tuple[int, float]] = []
    inside = 0
    most_inside = 0

    async def take_a_turn(number: int) -> None:
        nonlocal inside, most_inside
        async with pacing.turn():
            inside += 1
            most_inside = max(most_inside, inside)
            started.append((number, clock.now))
            await asyncio.sleep(0)  # others run meanwhile, and wait
            inside -= 1

    await asyncio.gather(*(take_a_turn(number) for number in range(20)))

    assert most_inside == 1
    assert [number for number, _ in started] == list(range(20)), "in the order they asked"
    times = [at for _, at in started]
    assert times[0] == 100.0, "the first goes at once"
    assert [round(later - earlier, 9) for earlier, later in pairwise(times)] == [0.05] * 19


async def test_after_a_quiet_spell_a_turn_waits_for_nothing() -> None:
    clock = Clock()
    pacing = Pacing(0.05, clock=clock, sleep=clock.sleep)
    async with pacing.turn():
        pass
    clock.now += 0.06
    async with pacing.turn():
        assert clock.now == 100.06, "no wait"
    async with pacing.turn():
        assert round(clock.now, 9) == 100.11, "the next one waits its spacing"
