"""The procedural saboteur: every candidate bug of a mission, and the seeded pick.

A catalog mission names the functions a bug may go in (those all of its tests depend on); any
other mission with code, a model's, say, is mutated in every function of its code, and its
proof decides which bug is caught as the domain's `sabotage_must_fail` asks."""

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
_FUNCTIONS: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "python": (".py", python_mutants.functions),
    "javascript": (".js", token_mutants.javascript_functions),
    "sql": (".sql", token_mutants.sql_functions),
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
        grader_hint=_grader_hint(mission.language, mutation),
    )


def sabotage_any(
    gold_files: dict[str, str], language: str, *, seed: int, try_number: int
) -> SabotageDraft:
    """A bug in any mission with code, in any function of its code files (one that does not
    parse offers none); as `sabotage`, the same seed and try plant the same bug."""
    suffix, functions_of = _FUNCTIONS[language]
    found: dict[tuple[str, str], Mutation] = {}
    for path, text in sorted(gold_files.items()):
        if not path.endswith(suffix):
            continue
        try:
            mutants = _MUTATORS[language](path, text, functions_of(text))
        except (SyntaxError, ValueError):
            continue
        for mutation in mutants:
            found.setdefault((mutation.path, mutation.content), mutation)
    if not found:
        raise ValueError("the mission's code offers no place for a procedural bug")
    mutation = pick(list(found.values()), seed, try_number)
    return SabotageDraft(
        sabotaged_files={**gold_files, mutation.path: mutation.content},
        bug_summary=mutation.describe(),
        grader_hint=_grader_hint(language, mutation),
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


def _grader_hint(language: str, mutation: Mutation) -> str:
    where = f"{mutation.path} line {mutation.line}"
    if language == "none":
        return (
            f"The flaw is on {where}. A good answer quotes that statement, says which fact of "
            "the brief it contradicts, and corrects it; other edits to the copy are not needed."
        )
    gold = f"the branch `{mutation.before}`" if not mutation.after else f"`{mutation.before}`"
    return (
        f"The gold code has {gold} at {where}. Accept any fix that makes every test pass "
        "without editing the tests; a fix that only special-cases the tested values is wrong."
    )
