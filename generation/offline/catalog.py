"""The built-in mission catalog: one folder per mission under `catalog/<language>/<slug>/`.

A folder holds `mission.yaml` (title, brief, which files are tests, which are the hidden tests
that only grading runs, and where a bug may be planted) beside the mission's real files. Bugs
go only where every test looks: `mutable` names the functions (or SQL functions and views)
that all of the mission's tests depend on, so that a planted bug fails every test, as the
default proof requires. Mutable functions avoid `while` loops: a swapped comparison there may
never end, which proves nothing.
For language `none`, `flaws` lists the factual errors that may be planted in the copy.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import get_args

import msgspec

from core.domains import Language
from generation.drafts import Files, MissionDraft


class Flaw(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    file: str
    # Replaced at one of its occurrences; the brief must contradict the result.
    find: str
    replace: str
    # What the brief says instead, for the reviewer.
    why: str


class _MissionFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    title: str
    brief: str
    tests: tuple[str, ...] = ()
    hidden_tests: tuple[str, ...] = ()
    mutable: dict[str, tuple[str, ...]] = {}
    flaws: tuple[Flaw, ...] = ()


class CatalogMission(msgspec.Struct, frozen=True, kw_only=True):
    slug: str
    language: Language
    title: str
    brief: str
    gold_files: Files
    test_files: Files
    hidden_test_files: Files
    # Gold file -> the functions a bug may be planted in.
    mutable: dict[str, tuple[str, ...]]
    flaws: tuple[Flaw, ...]

    def draft(self) -> MissionDraft:
        return MissionDraft(
            title=self.title,
            brief=self.brief,
            gold_files=dict(self.gold_files),
            test_files=dict(self.test_files),
            hidden_test_files=dict(self.hidden_test_files),
        )

    def wrote(self, draft: MissionDraft) -> bool:
        return draft.gold_files == self.gold_files and draft.test_files == self.test_files


def load() -> tuple[CatalogMission, ...]:
    root = files("generation.offline") / "catalog"
    missions = []
    for language in sorted(get_args(Language)):
        folder = root / language
        if folder.is_dir():
            for mission in sorted(folder.iterdir(), key=lambda entry: entry.name):
                if mission.is_dir() and not _left_behind(mission):
                    missions.append(_mission(mission, language))
    return tuple(missions)


def _mission(folder: Traversable, language: Language) -> CatalogMission:
    where = f"catalog/{language}/{folder.name}"
    try:
        described = msgspec.yaml.decode((folder / "mission.yaml").read_bytes(), type=_MissionFile)
    except (OSError, msgspec.ValidationError) as error:
        raise ValueError(f"{where}/mission.yaml: {error}") from None
    gold = dict(_files(folder, ""))
    del gold["mission.yaml"]
    missing = [path for path in described.tests if path not in gold]
    tests = {path: gold.pop(path) for path in described.tests if path in gold}
    missing += [path for path in described.hidden_tests if path not in gold]
    hidden = {path: gold.pop(path) for path in described.hidden_tests if path in gold}
    planted_in = [*described.mutable, *(flaw.file for flaw in described.flaws)]
    missing += [path for path in planted_in if path not in gold]
    if missing:
        raise ValueError(f"{where}/mission.yaml names files its folder lacks: {missing}")
    if language == "none":
        if not described.flaws or tests or hidden or described.mutable:
            raise ValueError(f"{where}: a copy mission has flaws to plant, and no tests or code")
    elif not tests or not hidden or not described.mutable or described.flaws:
        raise ValueError(
            f"{where}: a code mission needs tests, hidden tests and mutable functions, no flaws"
        )
    return CatalogMission(
        slug=folder.name,
        language=language,
        title=described.title,
        brief=described.brief,
        gold_files=gold,
        test_files=tests,
        hidden_test_files=hidden,
        mutable=described.mutable,
        flaws=described.flaws,
    )


def _files(folder: Traversable, prefix: str) -> list[tuple[str, str]]:
    found = []
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if _left_behind(entry):
            continue
        if entry.is_dir():
            found.extend(_files(entry, f"{prefix}{entry.name}/"))
        else:
            found.append((f"{prefix}{entry.name}", entry.read_text(encoding="utf-8")))
    return found


def _left_behind(entry: Traversable) -> bool:
    # Running a mission's tests in place leaves caches behind; they are not mission files.
    return entry.name.startswith(".") or entry.name in ("__pycache__", "node_modules")
