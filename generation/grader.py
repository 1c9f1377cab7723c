"""The grading side of a worker: claim submissions into the room under the grading cap,
counted from the table; grade each in the untrusted sandbox; heartbeat them; end each under
its attempt; take back the gradings of dead workers; give its own back at a stop.

The same discipline as generation's dispatcher, worker and sweeper, on the submissions table:
the dispatch lock makes count-then-claim atomic across processes, the in-process semaphore is
the seatbelt should the count ever be wrong, and every transition after the claim carries the
claim's attempt, so a worker that lost a grading writes nothing of it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import asyncpg
import msgspec

from core.sql import DATABASE_ERRORS, outlasting_outages
from generation.claims import fenced, heartbeat
from generation.gradings import queries
from generation.worker import PATIENCE_SECONDS
from qa import grading
from qa.proof import ProofUnavailable, Prover

log = logging.getLogger(__name__)

# A grading taken back this many times (its worker died each time) ends as an error: a
# submission that kills its worker would otherwise go round for ever.
MAX_ATTEMPTS = 3


class ClaimedGrading(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    attempt: int
    mission_id: int
    user_id: str
    language: str
    code_files: dict[str, str]
    visible_test_files: dict[str, str]
    hidden_test_files: dict[str, str]
    hidden_test_ids: list[str] | None


class Grader:
    def __init__(
        self,
        db: asyncpg.Pool,
        prover: Prover,
        *,
        worker_id: str,
        capacity: int,
        global_cap: int,
        languages: Sequence[str],
        heartbeat_timeout: timedelta,
        pending_expiry: timedelta,
        time_limit_s: float,
        on_slot_freed: Callable[[], None] = lambda: None,
    ) -> None:
        self._db = db
        self._prover = prover
        self.worker_id = worker_id
        self.capacity = capacity
        self._global_cap = global_cap
        self._languages = list(languages)
        self._heartbeat_timeout = heartbeat_timeout
        self._pending_expiry = pending_expiry
        self._time_limit_s = time_limit_s
        self._on_slot_freed = on_slot_freed
        self._seatbelt = asyncio.Semaphore(capacity)
        # Keyed by submission and attempt: a grading taken back may be claimed again by this
        # grader while its old attempt's task is still ending, and each leaves only its own.
        self._running: dict[tuple[int, int], tuple[ClaimedGrading, asyncio.Task[None]]] = {}
        self._claiming = asyncio.Lock()
        self._stopped = False

    def running(self) -> list[ClaimedGrading]:
        return [claimed for claimed, _ in self._running.values()]

    async def run_once(self, now: datetime | None = None) -> list[ClaimedGrading]:
        """One tick: take back dead workers' gradings, expire the stale pending, give back what
        a lost claim's answer left under this grader, then claim."""
        try:
            await self.sweep(now)
            await self.release_unheld()
        except DATABASE_ERRORS as error:
            log.warning("grading maintenance failed, will retry next tick: %s", error)
        return await self.claim(now)

    async def sweep(self, now: datetime | None = None) -> list[int]:
        rows = await self._db.fetch(
            queries["gradings_take_back_if_stale"], self._heartbeat_timeout, MAX_ATTEMPTS, now
        )
        for row in rows:
            log.warning(
                "submission %s attempt %s: its worker stopped heartbeating; %s",
                row["id"],
                row["attempt"],
                "ended as an error" if row["status"] == "error" else "back in the queue",
                extra={"submission_id": row["id"], "attempt": row["attempt"]},
            )
        expired = await self._db.fetch(
            queries["gradings_error_if_pending_expired"], self._pending_expiry, now
        )
        return [row["id"] for row in rows] + [row["id"] for row in expired]

    async def release_unheld(self) -> list[int]:
        """Give back the gradings running under this grader's identity that it does not run: a
        claim committed them, but its answer never arrived (a timeout, a dropped connection)."""
        async with self._claiming:  # between claims: none of this grader's is in flight
            rows = await self._db.fetch(
                queries["gradings_release_if_not_held"],
                self.worker_id,
                [claimed.id for claimed in self.running()],
            )
        for row in rows:
            log.warning(
                "submission %s went back to the queue: its claim's answer was lost",
                row["id"],
                extra={"submission_id": row["id"], "attempt": row["attempt"]},
            )
        return [row["id"] for row in rows]

    async def claim(self, now: datetime | None = None) -> list[ClaimedGrading]:
        async with self._claiming:  # runs never overlap within a process
            want = self.capacity - len(self._running)
            if want <= 0 or self._stopped or not self._languages:
                return []
            try:
                async with self._db.acquire() as connection, connection.transaction():
                    await connection.execute(queries["grading_dispatch_lock"])
                    rows = await connection.fetch(
                        queries["submissions_claim_within_cap"],
                        want,
                        self._global_cap,
                        self.worker_id,
                        self._languages,
                        now,
                    )
            except DATABASE_ERRORS as error:
                # Counting failed (or the claim did, its answer lost): the system counts as
                # full; what it may have claimed, the next tick's release_unheld gives back.
                log.warning("grading claim failed, claiming nothing until the next try: %s", error)
                return []
            claimed = [msgspec.convert(dict(row), ClaimedGrading) for row in rows]
            for grading_claim in claimed:
                task = asyncio.create_task(
                    self._run(grading_claim),
                    name=f"grading-{grading_claim.id}-attempt-{grading_claim.attempt}",
                )
                self._running[_held(grading_claim)] = (grading_claim, task)
            return claimed

    async def _run(self, claimed: ClaimedGrading) -> None:
        fields = {
            "submission_id": claimed.id,
            "attempt": claimed.attempt,
            "worker_id": self.worker_id,
        }
        try:
            async with self._seatbelt:
                verdict = await self._grade(claimed)
                # A blip must not throw a finished grading away: the write is fenced by the
                # attempt, so trying it again after an unsure commit writes nothing twice.
                written = await outlasting_outages(
                    functools.partial(
                        self._db.fetchval,
                        queries["grading_finish_if_running"],
                        claimed.id,
                        claimed.attempt,
                        verdict.status,
                        verdict.visible.passed,
                        verdict.visible.failed,
                        verdict.visible.total,
                        verdict.hidden.passed,
                        verdict.hidden.failed,
                        verdict.hidden.total,
                        msgspec.to_builtins(verdict.tests),
                        verdict.duration_s,
                        verdict.error,
                    ),
                    what=f"writing submission {claimed.id}'s verdict",
                    patience_seconds=PATIENCE_SECONDS,
                )
            if written is None:
                log.warning(
                    "submission %s attempt %s was taken back before its verdict; nothing written",
                    claimed.id,
                    claimed.attempt,
                    extra=fields,
                )
            else:
                log.info("submission %s graded: %s", claimed.id, verdict.status, extra=fields)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The verdict could not be written (an outage past the patience, a bug): the grading
            # stays running without heartbeats, and the sweeper takes it back.
            log.exception(
                "submission %s attempt %s: grading failed",
                claimed.id,
                claimed.attempt,
                extra=fields,
            )
        finally:
            del self._running[_held(claimed)]
            self._on_slot_freed()

    async def _grade(self, claimed: ClaimedGrading) -> grading.Verdict:
        try:
            return await grading.grade(
                self._prover,
                claimed.language,
                claimed.code_files,
                claimed.visible_test_files,
                claimed.hidden_test_files,
                claimed.hidden_test_ids,
                time_limit_s=self._time_limit_s,
            )
        except ProofUnavailable as error:
            none = grading.Counts(0, 0, 0)
            return grading.Verdict(
                status="error",
                visible=none,
                hidden=none,
                tests=[],
                duration_s=0,
                error=str(error),
            )

    async def heartbeat_once(self, now: datetime | None = None) -> list[int]:
        """Heartbeat the gradings under way; stop and return those taken back meanwhile."""
        held = self.running()
        if not held:
            return []
        alive = await heartbeat(self._db, queries["gradings_heartbeat_if_running"], held, now)
        lost = [
            claimed
            for claimed in held
            if claimed.id not in alive and _held(claimed) in self._running
        ]
        for claimed in lost:
            self._running[_held(claimed)][1].cancel()
        return [claimed.id for claimed in lost]

    async def stop(self, grace_seconds: float) -> None:
        """Claim nothing more; let the gradings under way end within the grace, then give the
        rest back to the queue (their attempt fences off whatever they still write)."""
        self._stopped = True
        async with self._claiming:
            tasks = [task for _, task in self._running.values()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace_seconds)
        held = self.running()
        if held:
            try:
                await self._db.fetch(queries["gradings_release_if_running"], *fenced(held))
            except DATABASE_ERRORS as error:
                log.error(  # noqa: TRY400 (an outage, not a bug)
                    "could not give %d grading(s) back, the sweeper will: %s", len(held), error
                )
        remaining = [task for _, task in self._running.values()]
        for task in remaining:
            task.cancel()
        await asyncio.gather(*remaining, return_exceptions=True)


def _held(claimed: ClaimedGrading) -> tuple[int, int]:
    return claimed.id, claimed.attempt
