"""What a model call costs: per-model prices, built in and overridable by an operator's file.

The price of the configured model is looked up once, when the provider is made, so a model
without a price stops start-up instead of recording calls at an unknown cost.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from importlib import resources
from pathlib import Path

import msgspec
import yaml

from generation.spend import Spend

BUILT_IN = "generation/openai/prices.yaml"
TOKENS_PER_PRICE = 1_000_000
# The ledger's precision (llm_calls.cost_usd is numeric(14, 6)), rounded as Postgres rounds.
LEDGER_PRECISION = Decimal("0.000001")
# A dated snapshot such as gpt-4o-2024-08-06 costs what its model costs.
_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class PriceError(ValueError):
    """The price table cannot be read, or lacks the configured model."""


class Rates(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """USD per 1M input tokens, and per 1M output tokens."""

    input: Decimal
    output: Decimal

    def __post_init__(self) -> None:
        if self.input < 0 or self.output < 0:
            raise ValueError("a price cannot be negative")

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        usd = (self.input * input_tokens + self.output * output_tokens) / TOKENS_PER_PRICE
        return usd.quantize(LEDGER_PRECISION, rounding=ROUND_HALF_UP)


class Price(Rates, frozen=True, forbid_unknown_fields=True):
    """A model's synchronous rates, and its rates through the Batch API when it has any."""

    batch: Rates | None = None


class PriceTable:
    def __init__(self, prices: Mapping[str, Price], sources: Sequence[str]) -> None:
        self._prices = dict(prices)
        self._sources = tuple(sources)

    def for_model(self, model: str) -> Price:
        price = self._prices.get(model) or self._prices.get(_SNAPSHOT_SUFFIX.sub("", model))
        if price is None:
            raise PriceError(
                f"no price for model {model!r} in {' or '.join(self._sources)}: put "
                f"`{model}: {{input: <USD per 1M input tokens>, output: <USD per 1M output "
                "tokens>}` in a YAML file and name that file in WARMPOOL_PRICES_FILE"
            )
        return price

    def batch_savings(self, batched_by_model: Mapping[str, Spend]) -> float:
        """What calls that went through a batch would have cost at their models' synchronous
        prices, less what they cost; a model without a price here saved nothing known."""
        saved = Decimal(0)
        for model, spent in batched_by_model.items():
            try:
                price = self.for_model(model)
            except PriceError:
                continue
            saved += price.cost(spent.input_tokens, spent.output_tokens)
            saved -= Decimal(str(spent.cost_usd))
        return float(saved)

    def batch_for_model(self, model: str) -> Rates:
        """The configured model's rates through the Batch API."""
        rates = self.for_model(model).batch
        if rates is None:
            raise PriceError(
                f"no batch price for model {model!r} in {' or '.join(self._sources)}, which "
                "WARMPOOL_BATCH=replenish needs: give its entry `batch: {input: <USD per 1M "
                "input tokens>, output: <USD per 1M output tokens>}` in the file named by "
                "WARMPOOL_PRICES_FILE, or set WARMPOOL_BATCH=off"
            )
        return rates


@functools.cache
def load(override: Path | None = None) -> PriceTable:
    """The built-in prices, with the entries of `override` (an operator's file) on top; read
    once per process."""
    text = resources.files("generation.openai").joinpath("prices.yaml").read_text("utf-8")
    prices = _parse(text, BUILT_IN)
    if override is None:
        return PriceTable(prices, [BUILT_IN])
    try:
        text = override.read_text(encoding="utf-8")
    except OSError as error:
        raise PriceError(f"{override}: cannot read the price file ({error.strerror})") from None
    return PriceTable({**prices, **_parse(text, str(override))}, [BUILT_IN, str(override)])


def _parse(text: str, source: str) -> dict[str, Price]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PriceError(f"{source}: not valid YAML: {error}") from None
    try:
        return msgspec.convert(document, dict[str, Price])
    except msgspec.ValidationError as error:
        raise PriceError(
            f"{source}: expected entries like `gpt-4o: {{input: 2.50, output: 10.00, batch: "
            f"{{input: 1.25, output: 5.00}}}}` (USD per 1M tokens; batch optional): {error}"
        ) from None
