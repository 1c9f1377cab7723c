"""A grading's two runs with the real sandbox, per language of the offline catalog: the gold
passes with the hidden tests checked against the ids its trusted proof found, the planted bug
fails, a hidden report naming other tests proves nothing, and a fix that forges its visible
report is caught by the runner's exit status."""

from __future__ import annotations

import pytest

from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from qa.grading import HIDDEN_PROVED_NOTHING, grade, hidden_test_ids
from qa.proof import Prover
from tests.support.proving import GRADING_TIME_LIMIT_S, require

FIRST_OF_EACH = [
    next(mission for mission in catalog.load() if mission.language == language)
    for language in ("python", "javascript", "sql")
]


@pytest.mark.parametrize("mission", FIRST_OF_EACH, ids=lambda mission: mission.language)
async def test_the_gold_passes_and_the_bug_fails_in_the_untrusted_sandbox(
    mission: CatalogMission, prover: Prover
) -> None:
    require(prover, mission.language, "untrusted")
    proven = await prover.run(
        mission.language, mission.gold_files, mission.hidden_test_files, trust="trusted"
    )
    expected = hidden_test_ids(proven)
    assert expected
    gold = await grade(
        prover,
        mission.language,
        mission.gold_files,
        mission.test_files,
        mission.hidden_test_files,
        expected,
        time_limit_s=GRADING_TIME_LIMIT_S,
    )
    assert (gold.status, gold.error) == ("passed", None)
    assert gold.hidden.total == len(expected)
    assert gold.visible.passed == gold.visible.total > 0

    bug = saboteur.sabotage(mission, seed=1, try_number=1).sabotaged_files
    broken = await grade(
        prover,
        mission.language,
        bug,
        mission.test_files,
        mission.hidden_test_files,
        expected,
        time_limit_s=GRADING_TIME_LIMIT_S,
    )
    assert broken.status == "failed"

    forged = await grade(
        prover,
        mission.language,
        mission.gold_files,
        mission.test_files,
        mission.hidden_test_files,
        [*expected, "a hidden test the report left out"],
        time_limit_s=GRADING_TIME_LIMIT_S,
    )
    assert (forged.status, forged.error) == ("error", HIDDEN_PROVED_NOTHING)


async def test_a_report_rewritten_by_the_candidates_code_is_not_passed(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    mission = FIRST_OF_EACH[0]
    [path] = mission.gold_files
    # At exit, after pytest wrote its report: every test "passed", whatever happened.
    forger = mission.gold_files[path] + (
        "\nimport atexit, glob\n"
        "def _forge():\n"
        "    for report in glob.glob('.proof/*.xml'):\n"
        "        open(report, 'w').write('<testsuite><testcase classname=\"x\" name=\"y\"/>'\n"
        "                                '</testsuite>')\n"
        "atexit.register(_forge)\n"
    )
    broken = forger.replace("def ", "def _unused_", 1)  # the first function no longer exists
    verdict = await grade(
        prover,
        "python",
        {path: broken},
        mission.test_files,
        mission.hidden_test_files,
        None,
        time_limit_s=GRADING_TIME_LIMIT_S,
    )
    assert verdict.status != "passed"


async def test_the_time_limit_bounds_both_runs_together(prover: Prover) -> None:
    """Each run alone would end within the grading's limit; the two together do not. What
    ended the hidden run is not said: only that it proved nothing."""
    require(prover, "python", "untrusted")
    mission = FIRST_OF_EACH[0]
    slow = {
        path: "import time\ntime.sleep(3)\n" + code for path, code in mission.gold_files.items()
    }
    verdict = await grade(
        prover, "python", slow, mission.test_files, mission.hidden_test_files, None, time_limit_s=5
    )

    assert (verdict.status, verdict.error) == ("error", HIDDEN_PROVED_NOTHING)
    assert verdict.visible.passed == verdict.visible.total > 0  # the first run ended in time
    assert 3 <= verdict.duration_s <= 5  # the visible run's own time


async def test_time_spent_in_the_hidden_run_is_not_in_the_duration(prover: Prover) -> None:
    """Code that sleeps only where the hidden tests lie (so that the time would spell what it
    read there) passes, and its duration is the visible run's alone, in whole seconds."""
    require(prover, "python", "untrusted")
    mission = FIRST_OF_EACH[0]
    hidden_names = sorted({path.rsplit("/", 1)[-1] for path in mission.hidden_test_files})
    sleeper = (
        "import os as _os, time as _time\n"
        f"if any(set(files) & {set(hidden_names)!r} for _, _, files in _os.walk('.')):\n"
        "    _time.sleep(4)\n"
    )
    assert not set(hidden_names) & {path.rsplit("/", 1)[-1] for path in mission.test_files}
    verdict = await grade(
        prover,
        "python",
        {path: sleeper + code for path, code in mission.gold_files.items()},
        mission.test_files,
        mission.hidden_test_files,
        None,
        time_limit_s=GRADING_TIME_LIMIT_S,
    )

    assert (verdict.status, verdict.error) == ("passed", None)
    assert isinstance(verdict.duration_s, int)
    assert verdict.duration_s <= 3  # pytest's start and the visible tests; the 4 s are not here
