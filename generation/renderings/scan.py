"""What a language's scan of a mission finds, the one way a rendering can fail, and the names
prose about the code mentions."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol


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


class Language(Protocol):
    """The variation point: how one language's names are found and rewritten (a module)."""

    def is_source(self, path: str) -> bool: ...

    def allowed(self, name: str) -> bool:
        """Whether a rendering may introduce `name`."""
        ...

    def fold(self, name: str) -> str:
        """The language's notion of the same name (SQL folds case)."""
        ...

    def scan(self, files: Sequence[SourceFile]) -> Scan: ...

    def rewrite(self, path: str, source: str, renames: Mapping[str, str]) -> str: ...


_CODE_SPAN = re.compile(r"`[^`\n]+`")
_WORD = re.compile(r"[A-Za-z_$][\w$]*")


def code_span_words(prose: str) -> Iterator[tuple[int, str]]:
    """(offset, word) of each name written in backticks in prose: a comment, a docstring, a
    brief. Renamed with the code, prose about the code stays true; other words are ordinary
    words, and stay."""
    for span in _CODE_SPAN.finditer(prose):
        for word in _WORD.finditer(span.group()):
            yield span.start() + word.start(), word.group()


def renamed_prose(prose: str, renames: Mapping[str, str], fold: Callable[[str], str]) -> str:
    pieces, position = [], 0
    for offset, word in code_span_words(prose):
        if fold(word) in renames:
            pieces += [prose[position:offset], renames[fold(word)]]
            position = offset + len(word)
    return "".join([*pieces, prose[position:]])
