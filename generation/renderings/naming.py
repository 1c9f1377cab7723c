"""New names for a mission's identifiers, and the numbering of the renderings they allow.

An identifier is split into its words (`unit_price`, `unitPrice`, `UNIT_PRICE`: unit, price);
each word may be kept or replaced by an alternative from the domain's vocabulary, and the
name is written back in the identifier's own style. Each identifier gets its own candidates,
none shared with another identifier or equal to any name already in the mission, so every
choice of candidates is a consistent renaming (no two names fall together), and two different
choices give different code.

Rendering `n` of `count` is a choice of candidates: `n` is scrambled by a bijection of
`range(count)` (so neighbouring numbers differ in most names, not only the last) and read as
a mixed-radix number, one digit per identifier, digit 0 keeping the name. The all-zero choice,
the mission as written, is not a rendering.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from importlib.resources import files

import msgspec

Vocabulary = Mapping[str, tuple[str, ...]]

_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


class _VocabularyFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    common: dict[str, tuple[str, ...]]
    domains: dict[str, dict[str, tuple[str, ...]]] = {}


@cache
def vocabulary(domain: str) -> Vocabulary:
    """The words of `domain` (the common ones, overlaid by the domain's own)."""
    source = files("generation.renderings") / "vocabulary.yaml"
    described = msgspec.yaml.decode(source.read_bytes(), type=_VocabularyFile)
    return {**described.common, **described.domains.get(domain, {})}


def candidates(identifier: str, words: Vocabulary) -> list[str]:
    """Every other name the identifier may take, in its own style, in a stable order."""
    core = identifier.strip("_")
    if not core:
        return []
    snake = "_" in core or core.islower() or core.isupper()
    parts = core.split("_") if snake else _CAMEL_PART.findall(core)
    if "".join(parts) != core.replace("_", ""):
        return []  # digits or letters the split cannot place: leave the name alone
    choices = [
        [part, *(_styled(part, word) for word in _alternatives(part.lower(), words))]
        for part in parts
    ]
    found = []
    for picked in itertools.product(*choices):
        name = identifier.replace(core, ("_" if snake else "").join(picked), 1)
        if name != identifier and name not in found:
            found.append(name)
    return found


def _alternatives(word: str, words: Vocabulary) -> tuple[str, ...]:
    if word in words:
        return words[word]
    for ending, singular_ending in (("ies", "y"), ("es", ""), ("s", "")):
        singular = word[: -len(ending)] + singular_ending
        if word.endswith(ending) and singular in words:
            return tuple(_plural(alternative) for alternative in words[singular])
    return ()


def _plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def _styled(part: str, word: str) -> str:
    """`word` written as `part` is: upper case, capitalised or lower case."""
    if part.isupper() and len(part) > 1:
        return word.upper()
    if part[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


class Plan:
    """The candidates of each renamable identifier, and the renderings they allow."""

    def __init__(
        self,
        renamable: Iterable[str],
        taken: Iterable[str],
        words: Vocabulary,
        *,
        allowed: Callable[[str], bool],
        fold: Callable[[str], str] = str,
    ) -> None:
        """`taken` are the names already in the mission (none may be introduced); `allowed`
        says whether the language lets a name be introduced at all; `fold` is the language's
        notion of the same name (SQL folds case)."""
        claimed = {fold(name) for name in taken}
        self.options: dict[str, list[str]] = {}
        for identifier in sorted(set(renamable)):
            mine = []
            for name in candidates(identifier, words):
                if fold(name) not in claimed and allowed(name):
                    claimed.add(fold(name))
                    mine.append(name)
            if mine:
                self.options[identifier] = mine
        self.count = math.prod(len(mine) + 1 for mine in self.options.values()) - 1
        digest = hashlib.sha256(msgspec.json.encode(self.options, order="sorted")).digest()
        self._step = _unit(int.from_bytes(digest[:16], "big"), self.count)
        self._offset = int.from_bytes(digest[16:], "big") % max(self.count, 1)

    def renames(self, number: int) -> dict[str, str]:
        """Rendering `number` (0 <= number < count): old name -> new name, changed names only."""
        if not 0 <= number < self.count:
            raise ValueError(f"rendering number {number} is outside 0..{self.count - 1}")
        index = (self._step * number + self._offset) % self.count + 1
        chosen = {}
        for identifier, mine in self.options.items():
            index, digit = divmod(index, len(mine) + 1)
            if digit:
                chosen[identifier] = mine[digit - 1]
        return chosen


def _unit(seed: int, modulus: int) -> int:
    """A number coprime with `modulus` (a step that visits every residue), drawn from `seed`."""
    if modulus <= 1:
        return 1
    step = seed % modulus or 1
    while math.gcd(step, modulus) != 1:
        step += 1
    return step
