"""Renderings: the same mission written with other names, so that each candidate's copy is
their own and a leaked copy names the instance it came from.

A rendering renames the mission's own identifiers consistently across its code and its tests
(gold, visible and hidden tests, and one variant's sabotaged code), with names drawn from the
domain's vocabulary (`naming`), and changes nothing else: strings, file names and every name
the mission does not own stay as they are, and comments and docstrings change only where they
quote a renamed name in backticks (`rename_prose` does the same for a brief or a hint). Python
is renamed through its syntax tree, JavaScript and SQL through their tokens; each language's
module says what it keeps.

`Renderer(sources, language=..., domain=...).count` is how many renderings a mission has
(every number in `range(count)` is one, each different from the others and from the mission
as written); `render(number)` makes one, the same for the same number, without running
anything. Renaming cannot prove that the behaviour is unchanged (a name may also live in data
the renamer cannot see), so a rendering is served only once `qa.renderings.prove` has run its
tests.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from generation.renderings import javascript, python, sql
from generation.renderings.naming import Plan, vocabulary
from generation.renderings.scan import Language, RenderingFailed, SourceFile, renamed_prose

__all__ = ["Renderer", "Rendering", "RenderingFailed", "Sources", "rename_prose"]

Files = dict[str, str]

_LANGUAGES: dict[str, Language] = {"python": python, "javascript": javascript, "sql": sql}


class Sources(msgspec.Struct, frozen=True, kw_only=True):
    """A mission's files with one variant's sabotaged code."""

    gold_files: Files
    test_files: Files
    sabotaged_files: Files
    hidden_test_files: Files = {}


class Rendering(msgspec.Struct, frozen=True, kw_only=True):
    number: int
    # Old name -> new name, for the names this rendering changes.
    renames: dict[str, str]
    gold_files: Files
    test_files: Files
    sabotaged_files: Files
    hidden_test_files: Files


class Renderer:
    def __init__(self, sources: Sources, *, language: str, domain: str) -> None:
        if language not in _LANGUAGES:
            raise ValueError(f"missions of language {language!r} have no code to render")
        self._sources = sources
        self._language = _LANGUAGES[language]
        found = self._language.scan(
            [
                *self._code(sources.gold_files, defines=True, visible=False),
                *self._code(sources.test_files, defines=True, visible=True),
                *self._code(sources.hidden_test_files, defines=True, visible=False),
                *self._code(sources.sabotaged_files, defines=False, visible=True),
            ]
        )
        self._plan = Plan(
            found.renamable,
            found.taken,
            vocabulary(domain),
            allowed=self._language.allowed,
            fold=self._language.fold,
        )

    @property
    def count(self) -> int:
        """How many renderings there are: `render` takes 0 to count - 1."""
        return self._plan.count

    def renames(self, number: int) -> dict[str, str]:
        """What rendering `number` renames (old name -> new name), without rendering it."""
        return self._plan.renames(number)

    def render(self, number: int) -> Rendering:
        renames = self._plan.renames(number)
        sources = self._sources
        return Rendering(
            number=number,
            renames=renames,
            gold_files=self._rewritten(sources.gold_files, renames),
            test_files=self._rewritten(sources.test_files, renames),
            sabotaged_files=self._rewritten(sources.sabotaged_files, renames),
            hidden_test_files=self._rewritten(sources.hidden_test_files, renames),
        )

    def _code(self, files: Files, *, defines: bool, visible: bool) -> list[SourceFile]:
        return [
            SourceFile(path, text, defines, visible)
            for path, text in files.items()
            if self._language.is_source(path)
        ]

    def _rewritten(self, files: Files, renames: Mapping[str, str]) -> Files:
        return {
            path: self._language.rewrite(path, text, renames)
            if self._language.is_source(path)
            else text
            for path, text in files.items()
        }


def rename_prose(text: str, renames: Mapping[str, str], *, language: str) -> str:
    """Prose about the code (a brief, a grader's hint) with the renamed names in its code spans
    (`cart_total`) renamed, as comments and docstrings are in the code."""
    fold = _LANGUAGES[language].fold
    return renamed_prose(text, {fold(old): new for old, new in renames.items()}, fold)
