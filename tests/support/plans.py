"""Reading query plans in tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)
