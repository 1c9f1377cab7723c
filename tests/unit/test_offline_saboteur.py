"""The catalog and the saboteur: every mission loads, and every sabotage changes exactly one
gold file, deterministically per seed and try."""

from __future__ import annotations

import ast
from collections import Counter

import pytest

from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from generation.offline.mutation import Mutation, pick

MISSIONS = catalog.load()
SEEDS = range(1, 21)
# Enough to see the same seed repeat itself and different tries differ.
FEW_SEEDS = range(1, 6)


def by_slug(slug: str) -> CatalogMission:
    return next(mission for mission in MISSIONS if mission.slug == slug)


def test_the_catalog_covers_every_language() -> None:
    counts = Counter(mission.language for mission in MISSIONS)
    assert counts["python"] >= 8
    assert counts["javascript"] >= 4
    assert counts["sql"] >= 4
    assert counts["none"] >= 3
    assert len({mission.title for mission in MISSIONS}) == len(MISSIONS)


@pytest.mark.parametrize("mission", MISSIONS, ids=lambda mission: mission.slug)
def test_a_mission_follows_its_language_conventions(mission: CatalogMission) -> None:
    tests, gold = set(mission.test_files), set(mission.gold_files)
    match mission.language:
        case "python":
            assert all(path.startswith("test_") and path.endswith(".py") for path in tests)
            assert all(path.endswith(".py") for path in gold)
        case "javascript":
            assert all(path.endswith(".test.js") for path in tests)
            assert all("module.exports" in mission.gold_files[path] for path in gold)
        case "sql":
            assert all(path.startswith("test_") and path.endswith(".sql") for path in tests)
            assert all("RETURNS SETOF text" in mission.test_files[path] for path in tests)
        case "none":
            assert tests == set()
    assert mission.draft().gold_files == mission.gold_files
    assert mission.wrote(mission.draft())


@pytest.mark.parametrize("mission", MISSIONS, ids=lambda mission: mission.slug)
def test_every_sabotage_changes_exactly_one_gold_file_and_seeds_spread(
    mission: CatalogMission,
) -> None:
    sabotages = [saboteur.sabotage(mission, seed=seed, try_number=1) for seed in SEEDS]
    for sabotage in sabotages:
        assert sabotage.sabotaged_files.keys() == mission.gold_files.keys()
        changed = [
            path
            for path, content in sabotage.sabotaged_files.items()
            if content != mission.gold_files[path]
        ]
        assert len(changed) == 1
        (path,) = changed
        assert path not in mission.test_files
        assert sabotage.bug_summary.startswith(f"{path} line ")
        assert path in sabotage.grader_hint
        if mission.language == "python":
            ast.parse(sabotage.sabotaged_files[path])
    assert len({sabotage.bug_summary for sabotage in sabotages}) >= 4


@pytest.mark.parametrize("mission", MISSIONS, ids=lambda mission: mission.slug)
def test_the_same_seed_and_try_plant_the_same_bug(mission: CatalogMission) -> None:
    for seed in FEW_SEEDS:
        assert saboteur.sabotage(mission, seed=seed, try_number=2) == saboteur.sabotage(
            mission, seed=seed, try_number=2
        )


@pytest.mark.parametrize("mission", MISSIONS, ids=lambda mission: mission.slug)
def test_each_further_try_plants_another_bug(mission: CatalogMission) -> None:
    for seed in FEW_SEEDS:
        tries = [saboteur.sabotage(mission, seed=seed, try_number=n) for n in (1, 2, 3)]
        assert len({sabotage.bug_summary for sabotage in tries}) == 3


def test_a_bug_summary_names_the_file_the_line_and_the_change() -> None:
    mission = by_slug("booking-calendar")
    summaries = {saboteur.sabotage(mission, seed=seed, try_number=1).bug_summary for seed in SEEDS}
    assert (
        "bookings.py line 15: `if periods and first <= periods[-1][1] + ONE_NIGHT:` became "
        "`if periods and first < periods[-1][1] + ONE_NIGHT:`, so a value exactly on the "
        "boundary is judged the other way"
    ) in summaries


def test_a_copy_flaw_replaces_one_occurrence() -> None:
    mission = by_slug("saas-landing-page")
    flawed = {
        mutation.content
        for mutation in saboteur.candidates(mission)
        if "$94 per month" in mutation.content or "30-day free trial" in mutation.content
    }
    # "14-day free trial" appears twice: each occurrence is its own flaw.
    assert len(flawed) == 3
    assert all(text.count("14-day free trial") + text.count("$49 per") == 2 for text in flawed)


def test_pick_refuses_an_empty_list_and_cycles_through_the_candidates() -> None:
    with pytest.raises(ValueError, match="no candidate"):
        pick([], seed=1, try_number=1)
    candidates = [Mutation("f", n, "a", "b", "c", str(n)) for n in range(3)]
    picked = [pick(candidates, seed=5, try_number=n).line for n in range(1, 7)]
    assert sorted(picked[:3]) == [0, 1, 2]
    assert picked[3:] == picked[:3]
