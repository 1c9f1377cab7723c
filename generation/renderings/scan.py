"""What a language's scan of a mission finds, and the one way a rendering can fail."""

from __future__ import annotations

from typing import NamedTuple


class RenderingFailed(ValueError):
    """The files cannot be rendered (they do not parse, or a name is not where it should be)."""


class SourceFile(NamedTuple):
    path: str
    text: str
    # Gold and tests define the mission's names; sabotaged code only uses them.
    defines: bool
    # What a candidate sees: the sabotaged code and the visible tests.
    visible: bool


class Scan(NamedTuple):
    # Names a rendering may change: the mission defines them, every use can follow, and a
    # candidate sees them.
    renamable: frozenset[str]
    # Names already in the mission, which no rendering may introduce.
    taken: frozenset[str]
