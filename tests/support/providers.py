"""A provider that answers from a script, for pipeline tests: real code, real tests, chosen
answers (a gold that fails, a bug that breaks nothing, the same mission twice)."""

from __future__ import annotations

from decimal import Decimal

import asyncpg

from core.domains import Domain
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import Ledger
from generation.offline import OfflineProvider, catalog
from generation.offline.provider import MODEL

PRICES = MissionDraft(
    title="Basket totals",
    brief="`basket.py` totals a basket. The tests say how; find the bug.",
    gold_files={"basket.py": "def total(prices):\n    return sum(prices)\n"},
    test_files={
        "test_basket.py": (
            "from basket import total\n\n"
            "def test_two_items():\n    assert total([2, 3]) == 5\n\n"
            "def test_one_item():\n    assert total([7]) == 7\n"
        )
    },
    hidden_test_files={
        "test_basket_more.py": (
            "from basket import total\n\n"
            "def test_three_items():\n    assert total([1, 2, 4]) == 7\n"
        )
    },
)
OFF_BY_ONE = SabotageDraft(
    sabotaged_files={"basket.py": "def total(prices):\n    return sum(prices) + 1\n"},
    bug_summary="basket.py line 2: the total is one too high",
    grader_hint="look at the return",
)
HARMLESS = SabotageDraft(
    sabotaged_files={"basket.py": "def total(prices):\n    return sum(prices)  # fine\n"},
    bug_summary="nothing, really",
    grader_hint="",
)
# The largest price, not the sum: right for one item, wrong for two (one of PRICES's two tests).
LARGEST_NOT_SUM = {"basket.py": "def total(prices):\n    return max(prices)\n"}
BROKEN_GOLD = MissionDraft(
    title=PRICES.title,
    brief=PRICES.brief,
    gold_files=LARGEST_NOT_SUM,
    test_files=PRICES.test_files,
    hidden_test_files=PRICES.hidden_test_files,
)
# A bug that breaks some of PRICES's tests but not all: test_two_items fails, test_one_item
# still passes.
BREAKS_ONE = SabotageDraft(
    sabotaged_files=LARGEST_NOT_SUM,
    bug_summary="basket.py line 2: the total is the largest price, not the sum",
    grader_hint="look at what the return adds up",
)


class FreeOfCharge:
    """What a test provider shares with the offline one: no prompt, no cost, nothing to close
    or cancel."""

    prompt_version: str | None = None
    abandon = None

    def worst_case_cost_usd(self, calls: int) -> Decimal:
        return Decimal(0)

    def batch_lane(self, db: asyncpg.Pool, *, size: int, wait_seconds: float) -> None:
        return None

    async def close(self) -> None:
        return


class Scripted(FreeOfCharge):
    name = "scripted"
    prompt_version = "test"

    def __init__(self, mission: MissionDraft, sabotages: list[SabotageDraft]) -> None:
        self._mission = mission
        self._sabotages = sabotages

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        async with ledger.call("generate", self.name, "script") as record:
            record.input_tokens, record.output_tokens = 100, 400
            return self._mission

    async def plant_bug(
        self, domain: Domain, mission: MissionDraft, *, seed: int, try_number: int, ledger: Ledger
    ) -> SabotageDraft:
        async with ledger.call("sabotage", self.name, "script") as record:
            record.input_tokens, record.output_tokens = 200, 100
            return self._sabotages[min(try_number, len(self._sabotages)) - 1]


class CatalogInTurn(OfflineProvider):
    """The offline provider, writing the catalog's missions of a language in turn, so that the
    first few missions a test makes are all different (the offline one draws at random, and two
    missions of one catalog entry differ only in their bugs); bugs are planted as it plants them."""

    def __init__(self) -> None:
        super().__init__(delay_seconds=0)
        self._written: dict[str, int] = {}

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        choices = [m for m in catalog.load() if m.language == domain.language]
        turn = self._written.get(domain.language, 0)
        self._written[domain.language] = turn + 1
        async with ledger.call("generate", self.name, MODEL):
            return choices[turn % len(choices)].draft()
