"""What the tables say once a chaos run has drained: how the jobs ended, and every breach of
the queue's promises (a job lost or left unfinished, a job completed twice, a model call billed
outside the job's own attempts, a job whose billed calls are not the calls the model served, a
job that paid twice for one purpose and try)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from core.sql import Executor

# A model call the provider served: its job, purpose and try.
Served = tuple[int, str, int]

FINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "awaiting_review"})

# How a failure reads -> the reason it is counted under.
FAILURE_REASONS = {
    "identical to one already in the pool": "duplicate of a stored mission",
    "stopped heartbeating": "swept: heartbeat stale",
    "died mid-generation and was restarted": "reconciled by its successor",
}

# (job, attempt) pairs of the ledger that the job never had: it never reached that attempt.
CALLS_OUTSIDE_ATTEMPTS = """
SELECT c.job_id, c.attempt, j.attempt AS job_attempt
FROM llm_calls c LEFT JOIN generation_jobs j ON j.id = c.job_id
WHERE j.id IS NULL OR c.attempt < 1 OR c.attempt > j.attempt
"""

# One attempt runs the pipeline once: a second mission call under it is a second run.
ATTEMPTS_RUN_TWICE = """
SELECT job_id, attempt, count(*) AS calls FROM llm_calls
WHERE purpose = 'generate' GROUP BY job_id, attempt HAVING count(*) > 1
"""

JOBS_WITH_TWO_MISSIONS = """
SELECT job_id, count(*) AS missions FROM missions
WHERE job_id IS NOT NULL GROUP BY job_id HAVING count(*) > 1
"""

# A job that made a mission was completed by the attempt it ended under: that attempt's
# mission call is on record (its own, or one it took over from an earlier attempt), finished
# while the job was still its own. A rendering job calls no model.
ENDINGS_WITHOUT_THEIR_CALL = """
SELECT j.id, j.status, j.attempt FROM generation_jobs j
WHERE j.status IN ('completed', 'awaiting_review') AND j.rendering_of IS NULL AND NOT EXISTS (
    SELECT 1 FROM llm_calls c
    WHERE c.job_id = j.id AND coalesce(c.resumed_by_attempt, c.attempt) = j.attempt
      AND c.purpose = 'generate' AND c.outcome = 'ok' AND NOT c.orphaned
)
"""


# The calls the ledger bills (a cost booked: an answer's, or a ceiling for a call that may have
# billed), per job, purpose and try; but those cut off (below), whose booking says nothing of
# whether the provider served them.
BILLED_CALLS = """
SELECT job_id, purpose, try_number FROM llm_calls
WHERE cost_usd > 0 AND NOT (provider_id IS NULL AND mode = 'background')
"""

# Calls cut off while the provider was creating their response (a SIGKILL, or a stop whose
# wait for the id ended first): the row never got the response's id, so nobody could take the
# call over; it stays open until its booking at its ceiling. The provider may have served it
# (OpenAI has no way to find a response by what it was asked).
CUT_OFF_CALLS = """
SELECT job_id, purpose, try_number FROM llm_calls
WHERE provider_id IS NULL AND mode = 'background'
"""


async def served_calls(stub_url: str) -> list[Served]:
    """Every response the stub at `stub_url` created (each one a call the provider bills), as
    the metadata the provider sent with it names it."""
    async with httpx.AsyncClient() as client:
        answer = await client.get(f"{stub_url.removesuffix('/v1')}/stub/created")
    answer.raise_for_status()
    return [
        (int(tags["job_id"]), str(tags["purpose"]), int(tags["try"]))
        for tags in (each["metadata"] for each in answer.json())
    ]


@dataclass
class Verdict:
    by_status: Counter[str] = field(default_factory=Counter)
    by_lane: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    # Jobs given back to the queue by a stopping worker at least once.
    released: int = 0
    ledger: Counter[str] = field(default_factory=Counter)
    # Calls a kill cut off before the provider named them (see CUT_OFF_CALLS).
    cut_off: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def jobs(self) -> int:
        return sum(self.by_status.values())


async def judge(
    database: Executor, accepted: Mapping[str, str], served: Sequence[Served] | None
) -> Verdict:
    """The tables against what the API accepted (idempotency key -> job id) and the calls the
    model served (None: the offline provider, which serves no call to count)."""
    verdict = Verdict()
    jobs = await database.fetch("SELECT id, lane, status, attempt, error FROM generation_jobs")
    for job in jobs:
        verdict.by_status[job["status"]] += 1
        verdict.by_lane[job["lane"]] += 1
        verdict.released += job["attempt"] > 1
        if job["status"] == "failed":
            verdict.failures[ending_of("failed", job["error"])] += 1
    unfinished = {s: n for s, n in verdict.by_status.items() if s not in FINAL_STATUSES}
    if unfinished:
        verdict.problems.append(f"jobs left unfinished: {unfinished}")

    interactive = {str(job["id"]) for job in jobs if job["lane"] == "interactive"}
    offered = set(accepted.values())
    if offered - interactive:
        verdict.problems.append(
            f"accepted jobs missing from the table: {sorted(offered - interactive)}"
        )
    if interactive - offered:
        verdict.problems.append(
            f"interactive jobs nobody was answered with: {sorted(interactive - offered)}"
        )

    for query, what in (
        (CALLS_OUTSIDE_ATTEMPTS, "ledger rows outside their job's attempts"),
        (ATTEMPTS_RUN_TWICE, "attempts that ran the pipeline twice"),
        (JOBS_WITH_TWO_MISSIONS, "jobs completed twice (two missions)"),
        (ENDINGS_WITHOUT_THEIR_CALL, "jobs ended by an attempt without its own mission call"),
    ):
        rows = await database.fetch(query)
        if rows:
            verdict.problems.append(f"{what}: {[dict(row) for row in rows[:20]]}")

    billed = await _calls(database, BILLED_CALLS)
    cut_off = await _calls(database, CUT_OFF_CALLS)
    verdict.cut_off = len(cut_off)
    if served is not None:
        verdict.problems += paid_as_served(billed, cut_off, served)

    for row in await database.fetch(
        "SELECT outcome, orphaned, count(*) AS calls FROM llm_calls GROUP BY outcome, orphaned"
    ):
        verdict.ledger[row["outcome"] + (" (orphaned)" if row["orphaned"] else "")] += row["calls"]
    return verdict


async def _calls(database: Executor, query: str) -> list[Served]:
    return [
        (row["job_id"], row["purpose"], row["try_number"]) for row in await database.fetch(query)
    ]


def paid_as_served(
    billed: Sequence[Served], cut_off: Sequence[Served], served: Sequence[Served]
) -> list[str]:
    """Per job, every call billed was served, and every call served was billed or cut off by a
    kill before the provider named it; and no job paid twice for one purpose and try."""
    problems = []
    billed_by_job, cut_by_job = Counter(c[0] for c in billed), Counter(c[0] for c in cut_off)
    served_by_job = Counter(call[0] for call in served)
    unequal = {
        job: (billed_by_job[job], cut_by_job[job], served_by_job[job])
        for job in billed_by_job.keys() | served_by_job.keys()
        if not billed_by_job[job] <= served_by_job[job] <= billed_by_job[job] + cut_by_job[job]
    }
    if unequal:
        problems.append(
            "jobs whose billed calls are not the calls the model served (billed, cut off, "
            f"served): {dict(sorted(unequal.items())[:20])}"
        )
    twice = sorted(call for call, times in Counter(billed).items() if times > 1)
    if twice:
        problems.append(f"paid twice for one purpose and try (job, purpose, try): {twice[:20]}")
    return problems


def ending_of(status: str, error: str | None) -> str:
    """A job's status, or for a failed job the reason it is counted under."""
    if status != "failed":
        return status
    for fragment, reason in FAILURE_REASONS.items():
        if error and fragment in error:
            return reason
    return error or "failed, no reason given"
