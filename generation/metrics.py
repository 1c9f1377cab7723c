"""Counters of what only this process sees: enqueues refused by the queue and jobs its sweeper
failed. Everything else /metrics shows is read from the tables at scrape time.

The counters live in the registry the caller gives (the app's own, never prometheus-client's
global one), so two apps in one process never collide.
"""

from __future__ import annotations

from typing import get_args

from prometheus_client import CollectorRegistry, Counter

from generation.jobs import Lane

PROCESS = "This process, since it started"
SWEEP_REASONS = ("stale", "expired", "requeued")


class QueueMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.sheds = Counter(
            "warmpool_sheds",
            f"{PROCESS}: enqueues refused because the pending depth was at its limit (lane "
            "interactive: a 503 answer; lane replenish: a replenishment pass stopped short).",
            ["lane"],
            registry=registry,
        )
        self.user_cap_refusals = Counter(
            "warmpool_user_cap_refusals",
            f"{PROCESS}: enqueues refused because the user already had their cap of active "
            "jobs (a 429 answer).",
            registry=registry,
        )
        self.swept_jobs = Counter(
            "warmpool_swept_jobs",
            f"{PROCESS}: jobs its sweeper failed (reason stale: a generation whose worker "
            "stopped heartbeating or that ran past the hard limit; reason expired: a job "
            "pending past the expiry) or gave back to the queue (reason requeued: a "
            "generation whose worker stopped heartbeating, with a model call to take over).",
            ["reason"],
            registry=registry,
        )
        # Every series exists from the start, at 0, so a rate over it is defined at once.
        for lane in get_args(Lane):
            self.sheds.labels(lane)
        for reason in SWEEP_REASONS:
            self.swept_jobs.labels(reason)
