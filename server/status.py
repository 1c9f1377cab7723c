"""`warmpool status`: the queue at a glance in a terminal."""

from __future__ import annotations

from core.sql import Connection
from generation import queue
from server.settings import Settings


async def print_status(connection: Connection, settings: Settings) -> None:
    stats = await queue.stats(
        connection, global_cap=settings.global_cap, max_pending=settings.max_pending
    )
    print(
        f"queue: {stats.pending} pending (limit {stats.max_pending}), "
        f"{stats.generating} generating (cap {stats.global_cap})"
    )
    print(f"{'lane':<12} {'pending':>8} {'generating':>11} {'oldest pending':>15}")
    for name, lane in stats.lanes.items():
        age = "-" if lane.oldest_pending_age_s is None else f"{lane.oldest_pending_age_s:.0f}s"
        print(f"{name:<12} {lane.pending:>8} {lane.generating:>11} {age:>15}")
