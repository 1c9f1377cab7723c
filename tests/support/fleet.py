"""What the workers can make, for tests: the capabilities of a worker with every tool, or
without some."""

from __future__ import annotations

from collections.abc import Iterable

from core import domains
from generation.registry import Capabilities
from tests.support.server import ROOT

DOMAIN_MAP = domains.load(ROOT / "domain_map.yaml")
EVERY_DOMAIN = Capabilities.judged(DOMAIN_MAP.domains.values(), lambda _: None)


def capabilities_without(cannot_make: Iterable[str], reason: str) -> Capabilities:
    """Every domain of the repository's map but those of `cannot_make`, which fail for `reason`."""
    excluded = set(cannot_make)
    return Capabilities.judged(
        DOMAIN_MAP.domains.values(), lambda domain: reason if domain.name in excluded else None
    )
