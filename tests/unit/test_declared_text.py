"""The text patterns the OpenAPI document declares say what the routes check: the same strings
pass, in Python's regular expressions (the server, the fuzzer's generator) and in the JSON Schema
validator that judges the fuzzer's cases."""

from __future__ import annotations

import re

import jsonschema_rs
import pytest

from core.text import storable
from server.routes.common import NO_NUL, PRINTABLE_ASCII, WHITE_SPACE, WORDS

SAMPLES = [
    "a",
    " a ",
    "",
    " ",
    "\t\n\r\x0b\x0c",
    "\x1c\x1d\x1e\x1f",
    "\x85\xa0\u2007\u3000",
    "\ufeff",
    "a\x00",
    "\x00",
    "é🙂\u202e",
    "'; DROP TABLE missions; --",
    "line\nline",
    "~",
    "a b",
    "a\t",
]


def test_white_space_is_what_strip_takes_away() -> None:
    spelled = re.compile(f"[{WHITE_SPACE}]")
    every = (chr(code) for code in range(0x110000))
    assert {c for c in every if spelled.fullmatch(c)} == {
        chr(code) for code in range(0x110000) if chr(code).isspace()
    }


@pytest.mark.parametrize("text", SAMPLES)
def test_words_are_text_with_a_character_to_read_and_no_nul(text: str) -> None:
    checked = bool(text.strip()) and storable(text)
    assert _both(WORDS, text) == checked


@pytest.mark.parametrize("text", SAMPLES)
def test_no_nul_is_what_postgres_stores(text: str) -> None:
    assert _both(NO_NUL, text) == storable(text)


@pytest.mark.parametrize("text", SAMPLES)
def test_printable_ascii_is_what_a_header_carries_of_it(text: str) -> None:
    carried = text == text.strip(" \t") and bool(text) and all(" " <= c <= "~" for c in text)
    assert _both(PRINTABLE_ASCII, text) == carried


def _both(pattern: str, text: str) -> bool:
    """Whether `text` matches, once both engines agree."""
    python = re.search(pattern, text) is not None
    validator = jsonschema_rs.validator_for({"type": "string", "pattern": pattern})
    assert validator.is_valid(text) == python, (pattern, text)
    return python
