"""The offline provider: missions from the built-in catalog, bugs planted procedurally.

No model is called, so every ledger row costs nothing; an optional delay per call simulates
model time for demos and load tests. Choices follow the seed (the job id): different jobs get
different missions and bugs, and the same job always gets the same ones.
"""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal

import asyncpg

from core.domains import Domain
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import Ledger
from generation.offline import catalog, saboteur
from generation.provider import ProviderError

MODEL = "offline-catalog"


class OfflineProvider:
    name = "offline"
    prompt_version = None
    abandon = None

    def __init__(self, delay_seconds: float) -> None:
        self._delay_seconds = delay_seconds
        self._catalog = catalog.load()

    def worst_case_cost_usd(self, calls: int) -> Decimal:
        return Decimal(0)

    def batch_lane(self, db: asyncpg.Pool, *, size: int, wait_seconds: float) -> None:
        return None

    async def close(self) -> None:
        return

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        # The catalog has missions in every language a domain may have.
        choices = [mission for mission in self._catalog if mission.language == domain.language]
        async with ledger.call("generate", self.name, MODEL):
            await asyncio.sleep(self._delay_seconds)
            return random.Random(f"mission:{seed}").choice(choices).draft()

    async def plant_bug(
        self,
        domain: Domain,
        mission: MissionDraft,
        *,
        seed: int,
        try_number: int,
        ledger: Ledger,
    ) -> SabotageDraft:
        source = next((entry for entry in self._catalog if entry.wrote(mission)), None)
        if source is None:
            raise ProviderError(
                f"the offline saboteur plants bugs in catalog missions only, and "
                f"{mission.title!r} is not one of them"
            )
        async with ledger.call("sabotage", self.name, MODEL):
            await asyncio.sleep(self._delay_seconds)
            return saboteur.sabotage(source, seed=seed, try_number=try_number)


class ProceduralSaboteur:
    """Bugs planted procedurally in any mission with code, at no model cost: no model is
    called, so nothing goes on the ledger. A domain's `variant_source: saboteur`."""

    name = "saboteur"

    def __init__(self) -> None:
        self._catalog = catalog.load()

    async def plant_bug(
        self,
        domain: Domain,
        mission: MissionDraft,
        *,
        seed: int,
        try_number: int,
        ledger: Ledger,
    ) -> SabotageDraft:
        source = next((entry for entry in self._catalog if entry.wrote(mission)), None)
        if source is not None:
            return saboteur.sabotage(source, seed=seed, try_number=try_number)
        try:
            return saboteur.sabotage_any(
                mission.gold_files, domain.language, seed=seed, try_number=try_number
            )
        except ValueError as error:
            raise ProviderError(f"the procedural saboteur found no bug to plant: {error}") from None
