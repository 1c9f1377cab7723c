"""Client text on its way into Postgres, whose text type holds every character but NUL."""

from __future__ import annotations

NUL = "\x00"


def storable(text: str) -> bool:
    """Whether Postgres can take `text` as a parameter: a NUL fails the query, which would
    answer a client's bad input with a server error."""
    return NUL not in text
