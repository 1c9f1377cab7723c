import re
from pathlib import Path

import pytest

from core.sql import Queries, parse

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["core", "server", "generation", "pool", "qa"]
USE = re.compile(r'queries\["([a-z_0-9]+)"\]')


def names_defined(package: str) -> set[str]:
    # A package may split its queries: queries.sql, and <topic>_queries.sql beside it.
    return {
        name
        for source in (ROOT / package).glob("*queries.sql")
        for name in Queries(package, source.name).names()
    }


def names_used(package: str) -> set[str]:
    used: set[str] = set()
    for source in (ROOT / package).rglob("*.py"):
        used.update(USE.findall(source.read_text()))
    return used


@pytest.mark.parametrize("package", PACKAGES)
def test_every_query_the_code_uses_exists_and_every_query_is_used(package: str) -> None:
    defined = names_defined(package)
    used = names_used(package)
    assert used - defined == set(), f"{package} uses queries its queries.sql lacks"
    assert defined - used == set(), f"{package}/queries.sql defines queries nothing uses"


def test_parse_reads_named_blocks_with_their_comments() -> None:
    text = "-- header\n\n-- name: first\n-- why\nSELECT 1;\n\n-- name: second\nSELECT 2;\n"
    assert parse(text, "x.sql") == {"first": "-- why\nSELECT 1;", "second": "SELECT 2;"}


def test_parse_refuses_a_name_twice_and_a_block_without_a_statement() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;", "x.sql")
    with pytest.raises(ValueError, match="has no statement"):
        parse("-- name: a\n-- only a comment\n", "x.sql")


def test_an_unknown_name_fails_loudly() -> None:
    with pytest.raises(KeyError, match=r"generation/queries\.sql has no query named 'nope'"):
        Queries("generation")["nope"]
