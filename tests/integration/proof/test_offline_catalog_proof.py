"""Every offline catalog mission under the real proof: its gold passes every test, and for each
of 20 seeds the planted bug fails every test, after a further try where a bug broke too little.

Different seeds often plant the same bug, so each distinct sabotaged project is proven once;
the first tries run concurrently, on the prover's slots.
"""

from __future__ import annotations

import asyncio

import pytest

from generation.drafts import SabotageDraft
from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from qa.policy import Verdict, judge_gold, judge_sabotage
from qa.proof import Prover
from tests.support.proving import require

SEEDS = range(1, 21)
# The default of WARMPOOL_SABOTAGE_TRIES: how often the pipeline plants a bug before it gives up.
MAX_TRIES = 3
CODE_MISSIONS = [mission for mission in catalog.load() if mission.language != "none"]


@pytest.mark.parametrize("mission", CODE_MISSIONS, ids=lambda mission: mission.slug)
async def test_the_gold_passes_and_every_seed_plants_a_bug_that_fails_every_test(
    mission: CatalogMission, prover: Prover
) -> None:
    require(prover, mission.language, "trusted")
    gold = await prover.run(
        mission.language, mission.gold_files, mission.test_files, trust="trusted"
    )
    assert judge_gold(gold).accepted, judge_gold(gold).reason
    hidden = await prover.run(
        mission.language, mission.gold_files, mission.hidden_test_files, trust="trusted"
    )
    assert judge_gold(hidden).accepted, judge_gold(hidden).reason
    assert not mission.hidden_test_files.keys() & mission.test_files.keys()
    # The gold itself, offered as a sabotage, is a bug that breaks nothing: never valid.
    assert not judge_sabotage(gold, "all").accepted

    async def prove(sabotage: SabotageDraft) -> Verdict:
        run = await prover.run(
            mission.language, sabotage.sabotaged_files, mission.test_files, trust="trusted"
        )
        return judge_sabotage(run, "all")

    first_tries = {seed: saboteur.sabotage(mission, seed=seed, try_number=1) for seed in SEEDS}
    distinct = {sabotage.bug_summary: sabotage for sabotage in first_tries.values()}
    verdicts = dict(
        zip(distinct, await asyncio.gather(*map(prove, distinct.values())), strict=True)
    )
    for seed, sabotage in first_tries.items():
        tries = [sabotage]
        while not verdicts[tries[-1].bug_summary].accepted:
            assert len(tries) < MAX_TRIES, (
                f"seed {seed}: no bug that fails every test in {MAX_TRIES} tries: "
                + "; ".join(f"{s.bug_summary} ({verdicts[s.bug_summary].reason})" for s in tries)
            )
            tries.append(saboteur.sabotage(mission, seed=seed, try_number=len(tries) + 1))
            if tries[-1].bug_summary not in verdicts:
                verdicts[tries[-1].bug_summary] = await prove(tries[-1])
