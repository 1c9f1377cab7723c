"""The one variation point of generation: who writes missions and plants bugs."""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

from core.domains import Domain
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import Ledger


class ProviderError(Exception):
    """A provider could not produce a usable answer; the message is shown on the job."""


class CallDeferred(Exception):
    """The call went out as a line of a batch (`call_id`, its ledger row): the job waits in the
    queue, holding no slot, until the batch has answered it, and its next attempt reads it."""

    def __init__(self, call_id: int) -> None:
        super().__init__(f"call {call_id} waits for its batch")
        self.call_id = call_id


class Provider(Protocol):
    name: str

    @property
    def prompt_version(self) -> str | None:
        """The version of the prompts a model is asked with, stored with each mission; None
        when no model is asked."""
        ...

    def worst_case_cost_usd(self, calls: int) -> Decimal:
        """The most `calls` model calls can cost: what the spend budget reserves."""
        ...

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        """Write a small, self-contained mission for `domain`, recording each model call."""
        ...

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

    async def close(self) -> None:
        """Let go of what the provider holds (its HTTP client)."""
        ...
