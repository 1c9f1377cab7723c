"""The one variation point of generation: who writes missions and plants bugs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Protocol

from core.domains import Domain
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import CallRecord, Ledger

# Cancels the call of a provider id and reports what it cost; None: the provider could not be
# asked this time.
Abandon = Callable[[str], Awaitable[CallRecord | None]]


class ProviderError(Exception):
    """A provider could not produce a usable answer; the message is shown on the job."""


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

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        """Write a small, self-contained mission for `domain`, recording each model call."""
        ...

    async def close(self) -> None:
        """Let go of what the provider holds (its HTTP client)."""
        ...
