from decimal import Decimal
from pathlib import Path

import pytest

from generation.openai import prices


def test_a_call_costs_its_tokens_at_the_model_s_price_per_million() -> None:
    price = prices.load().for_model("gpt-4o-mini")
    batch = prices.Rates(input=Decimal("0.075"), output=Decimal("0.30"))
    assert price == prices.Price(input=Decimal("0.15"), output=Decimal("0.60"), batch=batch)
    assert price.cost(1_000_000, 0) == Decimal("0.150000")
    assert price.cost(1200, 900) == Decimal("0.000720")  # 0.00018 + 0.00054


def test_every_built_in_model_has_a_batch_price_of_half_its_price() -> None:
    table = prices.load()
    for model in ["gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-5", "gpt-5-mini", "o4-mini"]:
        price, batch = table.for_model(model), table.batch_for_model(model)
        assert (batch.input * 2, batch.output * 2) == (price.input, price.output), model


def test_batching_a_model_without_a_batch_price_names_the_fix(tmp_path: Path) -> None:
    override = tmp_path / "prices.yaml"
    override.write_text("our-model: {input: 0.5, output: 0.5}\n")
    table = prices.load(override)
    assert table.for_model("our-model").batch is None
    with pytest.raises(prices.PriceError) as raised:
        table.batch_for_model("our-model")
    message = str(raised.value)
    assert "no batch price for model 'our-model'" in message
    assert "WARMPOOL_BATCH=off" in message
    assert "WARMPOOL_PRICES_FILE" in message


def test_a_dated_snapshot_costs_what_its_model_costs() -> None:
    table = prices.load()
    assert table.for_model("gpt-4o-2024-08-06") == table.for_model("gpt-4o")


def test_an_operator_file_overrides_and_adds_models(tmp_path: Path) -> None:
    override = tmp_path / "prices.yaml"
    override.write_text("gpt-4o: {input: 1, output: 2}\nour-model: {input: 0.5, output: 0.5}\n")
    table = prices.load(override)
    assert table.for_model("gpt-4o") == prices.Price(input=Decimal(1), output=Decimal(2))
    assert table.for_model("our-model").cost(2_000_000, 0) == Decimal("1.000000")
    assert table.for_model("gpt-4o-mini").input == Decimal("0.15")


def test_a_model_without_a_price_names_the_model_and_the_variable_to_set(tmp_path: Path) -> None:
    override = tmp_path / "prices.yaml"
    override.write_text("{}\n")
    with pytest.raises(prices.PriceError) as raised:
        prices.load(override).for_model("gpt-9")
    message = str(raised.value)
    assert "no price for model 'gpt-9'" in message
    assert f"generation/openai/prices.yaml or {override}" in message
    assert "WARMPOOL_PRICES_FILE" in message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4o: [1, 2\n", "not valid YAML"),
        ("gpt-4o: {input: 1}\n", r"expected entries like .*Object missing required field `output`"),
        ("gpt-4o: {input: -1, output: 2}\n", "a price cannot be negative"),
        ("gpt-4o: {input: 1, output: 2, cached: 1}\n", "unknown field `cached`"),
        ("gpt-4o: {input: 1, output: 2, batch: {input: 1}}\n", "missing required field `output`"),
    ],
)
def test_a_bad_price_file_says_where_and_what(tmp_path: Path, text: str, message: str) -> None:
    override = tmp_path / "prices.yaml"
    override.write_text(text)
    with pytest.raises(prices.PriceError, match=message) as raised:
        prices.load(override)
    assert str(raised.value).startswith(f"{override}: ")


def test_an_unreadable_price_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(prices.PriceError, match="cannot read the price file"):
        prices.load(tmp_path / "missing.yaml")
