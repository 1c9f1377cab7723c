"""What a chaos run does: its processes and their settings, the domains its jobs come from, the
jobs it offers and how long it gives them, the chaos, and the bounds it holds the system to."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from typing import Literal

from tests.chaos.load import Offer

# Copy missions are proven by no code and reviewed by people: cheap to make, so they carry
# the volume; once the small catalog's variants are stored, the rest are discarded as
# duplicates. Python missions run real proofs and are approved by them, and the waiting user
# is served at once; a mission serves two candidates with its one bug, so the replenisher plants
# no variants, and renders one rendering per mission: more would outlast the drain.
DOMAIN_MAP = """
tracks:
  marketing-manager: [marketing-copy]
  backend-engineer: [python-backend]
domains:
  marketing-copy:
    kind: non_technical
    language: none
    target: 1
  python-backend:
    kind: technical
    language: python
    review: proof
    target: 1
    retire_after: 2
    bug_share: 2
"""
TRACK_OF_LANGUAGE = {"none": "marketing-manager", "python": "backend-engineer"}


@dataclass(frozen=True)
class Scenario:
    jobs: int
    # Jobs are offered evenly over this time; the chaos happens within it.
    seconds: float
    kills: int
    # A python job holds a cap slot for seconds of proofs, a copy job for a fraction of one:
    # at 3% of 20 jobs/s, python jobs take about a third of the cap, and the rest still
    # catches up after each fault.
    python_share: float = 0.03
    # Requests the load keeps under way at once: enough to hold its pace while some wait out
    # a shed or an outage.
    lanes: int = 8
    apis: int = 2
    workers: int = 4
    global_cap: int = 10
    worker_concurrency: int = 3
    max_pending: int = 50
    heartbeat_timeout: float = 2.0
    tick: float = 0.5
    model_delay: float = 0.1
    # Where the model calls go: the loopback OpenAI stub through the real openai provider as
    # background calls (every paid call then checked against the calls the stub served), or
    # the offline provider, which a higher rate than the stub can serve on two cores needs.
    model: Literal["stub", "offline"] = "stub"
    # Below a job's time: a rolling restart both lets jobs finish and gives some back.
    shutdown_grace: float = 0.05
    # How many processes the rolling restart stops and replaces, API and worker in turn (all
    # six by default).
    rolling: int = 6
    postgres_down: float = 1.0
    # Every session of warmpool's processes is terminated every `terminate_every` seconds for
    # this long.
    terminate_seconds: float = 3.0
    terminate_every: float = 0.5
    # Beyond the heartbeat timeout plus one tick: the sampler's resolution and the scheduling
    # of a loaded machine (a late heartbeat or tick), within which a reclaim still counts as
    # on time.
    reclaim_margin: float = 1.0
    # A python job runs its proofs (pytest in a sandbox, the gold and the sabotage against the
    # visible and the hidden tests) on a machine that the whole run loads, and may wait for a
    # proof slot: it may generate this much longer than a copy job before it counts as stuck.
    proof_allowance: float = 12.0
    # Once a fault phase (the terminations, the PostgreSQL restart) stops, completions must be
    # back to this share of the offered rate, over a window of `rate_window` seconds, within
    # `recovery_within` seconds.
    recovery_share: float = 0.8
    rate_window: float = 2.0
    recovery_within: float = 10.0
    drain_within: float = 120.0
    seed: int = 0

    @property
    def reclaim_bound(self) -> float:
        return self.heartbeat_timeout + self.tick + self.reclaim_margin

    @property
    def allowances(self) -> dict[str, float]:
        """The seconds a job of each domain may generate beyond a copy job's."""
        return {"python-backend": self.proof_allowance}

    @property
    def rate(self) -> float:
        """Jobs offered per second."""
        return self.jobs / self.seconds

    def settings(self) -> dict[str, str]:
        return {
            "WARMPOOL_GLOBAL_CAP": str(self.global_cap),
            "WARMPOOL_WORKER_CONCURRENCY": str(self.worker_concurrency),
            "WARMPOOL_MAX_PENDING": str(self.max_pending),
            "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS": str(self.heartbeat_timeout),
            "WARMPOOL_TICK_SECONDS": str(self.tick),
            "WARMPOOL_OFFLINE_DELAY_SECONDS": str(self.model_delay),
            "WARMPOOL_SHUTDOWN_GRACE_SECONDS": str(self.shutdown_grace),
            "WARMPOOL_REPLENISH_SECONDS": "5",
            # A proof's visible and hidden runs go at once.
            "WARMPOOL_PROOF_SLOTS": "2",
            # One secret for every API process, as several API processes need.
            "WARMPOOL_SECRET_KEY": secrets.token_hex(32),
        }

    def offers(self) -> list[Offer]:
        rng = random.Random(self.seed)
        return [
            Offer(
                key=f"chaos-{index}",
                # Two jobs per user: missions in review count towards the user cap of 3.
                user_id=f"chaos-user-{index // 2}",
                track=TRACK_OF_LANGUAGE["python" if rng.random() < self.python_share else "none"],
            )
            for index in range(self.jobs)
        ]
