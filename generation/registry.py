"""Workers as rows: a worker process holds its worker's name in `workers` while it runs and
heartbeats there, with what it can make. A name that another live process holds is refused, so
no two workers share an identity.

A worker is live while its row's heartbeat is younger than the heartbeat timeout. A stopped
worker's row is left to lapse by itself, its capabilities still counted until then, so that a
deploy, whose old worker stops before its successor starts, never shows a moment in which no
live worker can make anything; its successor on the same machine takes the name at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

import asyncpg
import msgspec

from core.domains import Domain
from core.sql import Executor, Queries
from generation.worker import Worker, parse_worker_identity, process_alive

queries = Queries("generation")
log = logging.getLogger(__name__)


class WorkerNameTaken(Exception):
    def __init__(self, name: str, holder: str) -> None:
        super().__init__(
            f"worker name {name!r} is held by {holder}, which is still heartbeating; give this "
            "worker a name of its own (WARMPOOL_WORKER_NAME) or stop the other one"
        )


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker can make: its domains, and why it cannot make the others."""

    domains: tuple[str, ...] = ()
    disabled: dict[str, str] = {}

    @classmethod
    def judged(
        cls, domains: Iterable[Domain], unavailable: Callable[[Domain], str | None]
    ) -> Capabilities:
        """Each domain made unless `unavailable` gives the reason why not."""
        reasons = {domain.name: unavailable(domain) for domain in domains}
        return cls(
            domains=tuple(name for name, reason in reasons.items() if reason is None),
            disabled={name: reason for name, reason in reasons.items() if reason is not None},
        )


class Registration:
    def __init__(
        self,
        db: asyncpg.Pool,
        worker: Worker,
        *,
        heartbeat_timeout: timedelta,
        capabilities: Capabilities,
    ) -> None:
        self._db = db
        self.worker = worker
        self._heartbeat_timeout = heartbeat_timeout
        self._capabilities = capabilities

    async def take(self) -> None:
        """Hold the worker's name; raises WorkerNameTaken while another live process does."""
        holder = await self._db.fetchrow(queries["worker_by_name"], self.worker.name)
        dead = holder["worker_id"] if holder and self._dead(holder["worker_id"]) else None
        taken = await self._db.fetchval(
            queries["worker_take_name"],
            self.worker.name,
            self.worker.id,
            self.worker.capacity,
            list(self._capabilities.domains),
            self._capabilities.disabled,
            dead,
            self._heartbeat_timeout,
        )
        if taken is None:
            holder = await self._db.fetchrow(queries["worker_by_name"], self.worker.name)
            raise WorkerNameTaken(self.worker.name, holder["worker_id"] if holder else "another")

    async def beat(self) -> None:
        held = await self._db.fetchval(
            queries["worker_heartbeat_if_held"],
            self.worker.name,
            self.worker.id,
            len(self.worker.running()),
        )
        if held is None:
            log.error(
                "worker name %s was taken by another process while this one was silent; give "
                "each worker a name of its own",
                self.worker.name,
                extra={"worker_id": self.worker.id},
            )

    def _dead(self, worker_id: str) -> bool:
        """A holder that was a process of this machine and no longer exists (this process's
        own identity too: a pid reused after a restart, as in a container)."""
        owner = parse_worker_identity(worker_id)
        if owner is None or owner[1] != self.worker.host:
            return False
        return worker_id == self.worker.id or not process_alive(owner[2])


class LiveWorker(msgspec.Struct, frozen=True, kw_only=True):
    """A worker whose heartbeat is younger than the heartbeat timeout, as GET /v1/workers
    shows it."""

    name: str
    started_at: datetime
    heartbeat_at: datetime
    domains: list[str]
    # Why it cannot make each of the other domains of its domain map.
    disabled: dict[str, str]
    slots: int
    running: int


class DisabledReason(msgspec.Struct, frozen=True):
    worker: str
    reason: str


# A domain that a live worker neither makes nor gives a reason for: its domain map lacks it.
NOT_IN_ITS_MAP = "not in this worker's domain map"
NO_WORKER = "no worker is running"


class Fleet(msgspec.Struct, frozen=True):
    """The live workers, and what they can make between them."""

    workers: list[LiveWorker]

    def can_make(self, domain: str) -> bool:
        return any(domain in worker.domains for worker in self.workers)

    def disabled_reasons(self, domain: str) -> list[DisabledReason]:
        """Why each live worker that cannot make `domain` cannot."""
        return [
            DisabledReason(worker.name, worker.disabled.get(domain, NOT_IN_ITS_MAP))
            for worker in self.workers
            if domain not in worker.domains
        ]


def explained(reasons: Sequence[DisabledReason]) -> str:
    """Why a domain that no live worker makes cannot be made, for a person to read: each live
    worker's reason, or that none is running."""
    return "; ".join(f"worker {each.worker}: {each.reason}" for each in reasons) or NO_WORKER


async def live(
    connection: Executor, *, heartbeat_timeout: timedelta, now: datetime | None = None
) -> Fleet:
    rows = await connection.fetch(queries["workers_live"], heartbeat_timeout, now)
    return Fleet([LiveWorker(**dict(row)) for row in rows])
