"""One planted change to one file, described for reviewers and graders, and the seeded pick."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    path: str
    line: int
    before: str
    # Empty when the change removes `before` altogether (a dropped branch).
    after: str
    # How the behaviour changes, completing "so ...".
    effect: str
    # The whole file with the change in place.
    content: str

    def describe(self) -> str:
        change = (
            f"`{self.before}` became `{self.after}`"
            if self.after
            else f"the branch `{self.before}` was removed"
        )
        return f"{self.path} line {self.line}: {change}, so {self.effect}"


def pick(mutations: Sequence[Mutation], seed: int, try_number: int) -> Mutation:
    """The seed orders the candidates; each further try takes the next one in that order."""
    if not mutations:
        raise ValueError("no candidate mutation to pick from")
    order = list(mutations)
    random.Random(f"sabotage:{seed}").shuffle(order)
    return order[(try_number - 1) % len(order)]
