"""The procedural saboteur: every candidate bug of a catalog mission, and the seeded pick."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from generation.drafts import SabotageDraft
from generation.offline import python_mutants, token_mutants
from generation.offline.catalog import CatalogMission
from generation.offline.mutation import Mutation, pick

_MUTATORS: dict[str, Callable[[str, str, Sequence[str]], list[Mutation]]] = {
    "python": python_mutants.mutants,
    "javascript": token_mutants.javascript_mutants,
    "sql": token_mutants.sql_mutants,
}


def candidates(mission: CatalogMission) -> list[Mutation]:
    if mission.language == "none":
        found = _flaws(mission)
    else:
        mutate = _MUTATORS[mission.language]
        found = [
            mutation
            for path, functions in sorted(mission.mutable.items())
            for mutation in mutate(path, mission.gold_files[path], functions)
        ]
    # Two edits may write the same file (`IS NOT NULL` loses its NOT either way): keep one.
    unique: dict[tuple[str, str], Mutation] = {}
    for mutation in found:
        unique.setdefault((mutation.path, mutation.content), mutation)
    return list(unique.values())


def sabotage(mission: CatalogMission, *, seed: int, try_number: int) -> SabotageDraft:
    """The same seed and try always plant the same bug; each further try plants another."""
    mutation = pick(candidates(mission), seed, try_number)
    return SabotageDraft(
        sabotaged_files={**mission.gold_files, mutation.path: mutation.content},
        bug_summary=mutation.describe(),
        grader_hint=_grader_hint(mission, mutation),
    )


def _flaws(mission: CatalogMission) -> list[Mutation]:
    found = []
    for flaw in mission.flaws:
        text = mission.gold_files[flaw.file]
        start = text.find(flaw.find)
        while start >= 0:
            flawed = text[:start] + flaw.replace + text[start + len(flaw.find) :]
            line = text.count("\n", 0, start)
            found.append(
                Mutation(
                    path=flaw.file,
                    line=line + 1,
                    before=text.splitlines()[line].strip(),
                    after=flawed.splitlines()[line].strip(),
                    effect=f"the copy contradicts the brief: {flaw.why}",
                    content=flawed,
                )
            )
            start = text.find(flaw.find, start + 1)
    return found


def _grader_hint(mission: CatalogMission, mutation: Mutation) -> str:
    where = f"{mutation.path} line {mutation.line}"
    if mission.language == "none":
        return (
            f"The flaw is on {where}. A good answer quotes that statement, says which fact of "
            "the brief it contradicts, and corrects it; other edits to the copy are not needed."
        )
    gold = f"the branch `{mutation.before}`" if not mutation.after else f"`{mutation.before}`"
    return (
        f"The gold code has {gold} at {where}. Accept any fix that makes every test pass "
        "without editing the tests; a fix that only special-cases the tested values is wrong."
    )
