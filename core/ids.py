"""Row ids as the API shows them: decimal strings."""

from __future__ import annotations

# Longer than this cannot be a bigint, so it names no row.
MAX_ID_DIGITS = 18


def parse_id(text: str) -> int | None:
    """The row id `text` names, or None: anything but ASCII digits names no row (a 404, not a
    validation error)."""
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_ID_DIGITS:
        return None
    return int(text)
