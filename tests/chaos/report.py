"""What a chaos run saw, and its summary: jobs and how they ended, kills and reclaim times,
restarts, terminated sessions, how the system came back after each fault phase, in-flight
samples, and every breach of the queue's promises."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from tests.chaos.load import Load, Pace
from tests.chaos.recovery import Recovery
from tests.chaos.sampler import Reclaim, Sampler
from tests.chaos.scenario import TRACK_OF_LANGUAGE, Scenario
from tests.chaos.verdict import Verdict


@dataclass
class Kill:
    worker_id: str
    held: list[int]
    reclaim: Reclaim
    # How the jobs it held ended: by the sweeper, or by its successor's reconcile.
    endings: dict[str, int] = field(default_factory=dict)


@dataclass
class Report:
    scenario: Scenario
    verdict: Verdict
    load: Load
    sampler: Sampler
    kills: list[Kill]
    # Processes stopped with SIGTERM and replaced, one after the other.
    rolled: list[str]
    postgres_restarts: int
    # After the PostgreSQL restart: until every API process was ready and every worker had
    # claimed a job again.
    recovered_in: float | None
    # Jobs offered and accepted per second just before the PostgreSQL stop, accepted just after
    # its start.
    restart_pace: Pace | None
    terminated: int
    # What a session made after the database's default isolation changed began in.
    isolation: str | None
    recoveries: list[Recovery]
    seconds: float
    problems: list[str]

    def reclaim_seconds(self) -> list[float]:
        """Of the kills that caught a worker holding jobs: one holding none is reclaimed at once."""
        return [
            kill.reclaim.seconds
            for kill in self.kills
            if kill.held and kill.reclaim.seconds is not None
        ]

    def _restart_pace(self) -> str:
        pace = self.restart_pace
        if pace is None:
            return "no PostgreSQL restart"
        return (
            f"the load around the PostgreSQL restart: in the {pace.before:.1f}s before the stop, "
            f"{pace.offered_before:.1f} jobs/s offered and {pace.accepted_before:.1f} accepted; "
            f"in the {pace.after:g}s after the start, {pace.accepted_after:.1f} accepted"
        )

    def _recovery(self, r: Recovery) -> str:
        s = self.scenario
        oldest = None if r.oldest is None else r.oldest.age
        return (
            f"{r.fault}: {_rate(r.during)} ended meanwhile; once over, the oldest generating job "
            f"{_seconds(oldest)} old at most (beyond its domain's time) from {s.reclaim_bound:g}s after on (asserted within "
            f"{s.reclaim_bound:g}s), completions back to {s.recovery_share:.0%} of the "
            f"{r.offered:.1f} jobs/s offered before it, over {s.rate_window:g}s "
            f"{_seconds(r.back_in)} after (asserted within "
            f"{s.recovery_within:g}s)"
        )

    def summary(self) -> str:
        s, v = self.scenario, self.verdict
        python = sum(offer.track == TRACK_OF_LANGUAGE["python"] for offer in self.load.offers)
        lines = [
            f"chaos run of {self.seconds:.0f}s (seed {s.seed}): {s.apis} API processes and "
            f"{s.workers} workers, global cap {s.global_cap} of {s.workers * s.worker_concurrency} "
            f"worker slots, heartbeat timeout {s.heartbeat_timeout:g}s, tick {s.tick:g}s, "
            f"{s.model_delay:g}s per model call",
            f"mix: {len(self.load.offers) - python} copy jobs (language none, human review), "
            f"{python} python jobs (trusted proofs, approved by them, {s.proof_allowance:g}s "
            f"allowed for them), offered over {s.seconds:g}s ({s.rate:g} jobs/s)",
            f"jobs: {v.jobs} ({dict(v.by_lane)}), final statuses {dict(v.by_status)}",
            f"failed: {dict(v.failures)}",
            f"released by a stopping worker and run again: {v.released}",
            f"API answers: {dict(sorted(self.load.answers.items()))}",
            f"ledger: {dict(v.ledger)}; calls a kill cut off before the provider named them: "
            f"{v.cut_off}",
            f"kills: {len(self.kills)}, jobs held at the kill {[len(k.held) for k in self.kills]}, "
            f"their endings {[k.endings for k in self.kills]}",
            f"restarts: rolling over {len(self.rolled)} processes ({', '.join(self.rolled)}), "
            f"PostgreSQL {self.postgres_restarts}x ({s.postgres_down:g}s down), "
            + (
                f"every process working again {self.recovered_in:.1f}s later"
                if self.recovered_in is not None
                else "not every process recovered"
            ),
            self._restart_pace(),
            f"new sessions' default isolation: {self.isolation}, from before the restart on; "
            f"sessions terminated: {self.terminated}, every {s.terminate_every:g}s for "
            f"{s.terminate_seconds:g}s",
        ]
        lines += [self._recovery(r) for r in self.recoveries]
        lines += [
            f"in flight: {self.sampler.samples} samples, highest {self.sampler.highest} "
            f"(cap {s.global_cap}), longest gap between two answered samples "
            f"{self.sampler.longest_gap * 1000:.0f} ms, {self.sampler.failed_samples} failed "
            "during the outage",
        ]
        times = self.reclaim_seconds()
        if times:
            lines.append(
                f"reclaim after a kill: min {min(times):.2f}s, median "
                f"{statistics.median(times):.2f}s, max {max(times):.2f}s; heartbeat timeout + "
                f"tick {s.heartbeat_timeout + s.tick:g}s, asserted within {s.reclaim_bound:g}s"
            )
        lines += [f"PROBLEM: {problem}" for problem in self.problems]
        return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}s"


def _rate(value: float | None) -> str:
    return "no count sampled of the jobs" if value is None else f"{value:.1f} jobs/s"
