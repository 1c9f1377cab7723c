"""A dispatcher over a worker of its own, for tests that claim and run jobs in this process."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import asyncpg

from generation.dispatcher import Dispatcher
from generation.sweeper import Sweeper
from generation.worker import FINISHING_SECONDS, PATIENCE_SECONDS, Generator, Worker
from tests.support.generators import Holding

# The kernel's largest pid: above it, never a live process.
PID_MAX = int(Path("/proc/sys/kernel/pid_max").read_text())
MINUTE = timedelta(minutes=1)
NAMES = itertools.count()


def dispatcher(
    pool: asyncpg.Pool,
    generator: Generator,
    *,
    cap: int = 5,
    replenish_cap: int = 5,
    capacity: int | None = None,
    name: str | None = None,
    patience_seconds: float = PATIENCE_SECONDS,
    finishing_seconds: float = FINISHING_SECONDS,
    domains: Iterable[str] | None = None,
) -> Dispatcher:
    """`domains`: the only ones the worker can make and claims (None: every domain)."""
    # Each worker a name of its own: a worker gives back the jobs held under its identity
    # that it does not run, so two in one process must not share one.
    worker = Worker(
        pool,
        generator,
        name=name or f"test-worker-{next(NAMES)}",
        capacity=capacity or cap,
        patience_seconds=patience_seconds,
        finishing_seconds=finishing_seconds,
    )
    sweeper = Sweeper(
        pool, heartbeat_timeout=MINUTE, stuck_after=10 * MINUTE, pending_expiry=60 * MINUTE
    )
    return Dispatcher(
        pool, worker, sweeper, global_cap=cap, replenish_cap=replenish_cap, domains=domains
    )


# A process of the worker "box" on "box-host" that no longer exists.
DEAD = f"box:box-host:{PID_MAX + 1}"


def restarted(pool: asyncpg.Pool) -> Worker:
    """The dead process's successor, which takes a silent heartbeat for death at once."""
    return Worker(
        pool, Holding(), name="box", host="box-host", capacity=1, presumed_dead_after=timedelta(0)
    )
