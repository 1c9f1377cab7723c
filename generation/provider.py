"""The one variation point of generation: who writes missions and plants bugs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Protocol

import asyncpg

from core.domains import Domain
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import CallRecord, Ledger

# Cancels the call of a provider id and reports what it cost; None: the provider could not be
# asked this time.
Abandon = Callable[[str], Awaitable[CallRecord | None]]


class ProviderError(Exception):
    """A provider could not produce a usable answer; the message is shown on the job."""


class CallDeferred(Exception):
    """The call went out as a line of a batch (`call_id`, its ledger row): the job waits in the
    queue, holding no slot, until the batch has answered it, and its next attempt reads it."""

    def __init__(self, call_id: int) -> None:
        super().__init__(f"call {call_id} waits for its batch")
        self.call_id = call_id


class Batches(Protocol):
    """A provider's batches of calls: lines submitted and batches polled, one pass at a time
    across processes."""

    async def run_once(self) -> object: ...

    async def abandon(self, provider_id: str) -> CallRecord | None:
        """A line's call that no job will read, as a record to settle; None while its batch is
        under way (it is asked again later)."""
        ...


class BugPlanter(Protocol):
    """Who plants a mission's bugs: the provider that writes missions, or the procedural
    saboteur."""

    name: str

    async def plant_bug(
        self,
        domain: Domain,
        mission: MissionDraft,
        *,
        seed: int,
        try_number: int,
        ledger: Ledger,
    ) -> SabotageDraft:
        """Plant one bug; `try_number` (1, 2, ...) asks for a different one after a failed proof."""
        ...


class Provider(BugPlanter, Protocol):
    @property
    def prompt_version(self) -> str | None:
        """The version of the prompts a model is asked with, stored with each mission; None
        when no model is asked."""
        ...

    def worst_case_cost_usd(self, calls: int) -> Decimal:
        """The most `calls` model calls can cost: what the spend budget reserves."""
        ...

    @property
    def abandon(self) -> Abandon | None:
        """Cancels at the provider a call that no job will use (generation/abandoned.py); None
        for a provider whose calls never outlive their worker."""
        ...

    def batch_lane(self, db: asyncpg.Pool, *, size: int, wait_seconds: float) -> Batches | None:
        """The batches of this provider's calls (WARMPOOL_BATCH); None for a provider that
        has none."""
        ...

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        """Write a small, self-contained mission for `domain`, recording each model call."""
        ...

    async def close(self) -> None:
        """Let go of what the provider holds (its HTTP client)."""
        ...
