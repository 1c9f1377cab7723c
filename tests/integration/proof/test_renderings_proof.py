"""Renderings are semantics-preserving, as a property over the offline catalog: any rendering
of any code mission, proven with real pytest, Jest and pgTAP, passes with its gold every test,
visible and hidden, and fails with its bug exactly the tests the unrendered bug fails, the
hidden ones included.

A few renderings per mission keep this tier's cost bounded: tests/unit/test_renderings.py
checks a hundred per mission without running them, and `bench/renderings.py` proves many more
and reports how fast.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from generation.renderings import Renderer, Sources
from qa import renderings
from qa.policy import judge_sabotage
from qa.proof import Prover
from qa.results import ProofRun
from tests.support.proving import require
from tests.support.rendered_pool import DOMAINS

CODE_MISSIONS = [mission for mission in catalog.load() if mission.language != "none"]
EXAMPLES_PER_MISSION = 5

_variants: dict[str, tuple[Renderer, ProofRun, ProofRun]] = {}


async def first_variant(
    mission: CatalogMission, prover: Prover
) -> tuple[Renderer, ProofRun, ProofRun]:
    """The mission's renderer for its first planted bug that fails every test, and that bug's
    unrendered runs of the visible and the hidden tests; made once per mission."""
    if mission.slug not in _variants:
        for seed in range(1, 20):
            sabotage = saboteur.sabotage(mission, seed=seed, try_number=1)
            run = await prover.run(
                mission.language, sabotage.sabotaged_files, mission.test_files, trust="trusted"
            )
            if judge_sabotage(run, "all").accepted:
                break
        else:
            pytest.fail(f"{mission.slug}: no planted bug in 19 seeds fails every test")
        hidden = await prover.run(
            mission.language, sabotage.sabotaged_files, mission.hidden_test_files, trust="trusted"
        )
        assert hidden.conclusive, hidden.reason
        sources = Sources(
            gold_files=mission.gold_files,
            test_files=mission.test_files,
            sabotaged_files=sabotage.sabotaged_files,
            hidden_test_files=mission.hidden_test_files,
        )
        renderer = Renderer(sources, language=mission.language, domain=DOMAINS[mission.language])
        _variants[mission.slug] = renderer, run, hidden
    return _variants[mission.slug]


@pytest.mark.parametrize("mission", CODE_MISSIONS, ids=lambda mission: mission.slug)
@settings(
    max_examples=EXAMPLES_PER_MISSION,
    deadline=None,
    # The prover is the session's; each example proves its own rendering.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
async def test_every_rendering_proves_as_its_mission_does(
    mission: CatalogMission, prover: Prover, data: st.DataObject
) -> None:
    require(prover, mission.language, "trusted")
    renderer, reference, hidden_reference = await first_variant(mission, prover)
    assert renderer.count > 1000, f"{mission.slug} has only {renderer.count} renderings"
    number = data.draw(st.integers(0, renderer.count - 1), label="rendering")
    rendering = renderer.render(number)
    assert rendering.renames, "a rendering renames something"
    proof = await renderings.prove(
        prover,
        language=mission.language,
        trust="trusted",
        must_fail="all",
        gold_files=rendering.gold_files,
        test_files=rendering.test_files,
        sabotaged_files=rendering.sabotaged_files,
        hidden_test_files=rendering.hidden_test_files,
        reference=reference,
        hidden_reference=hidden_reference,
    )
    # The bug ran the hidden tests too, each with the outcome it had before renaming.
    hidden_ids = {test.id for test in hidden_reference.tests}
    assert hidden_ids <= {test.id for test in proof.sabotage.tests}
    assert proof.accepted, f"{rendering.renames}: {proof.reason}\n{proof.sabotage.log_excerpt}"
    assert proof.reason.endswith(f"({len(hidden_ids)} of them hidden)"), proof.reason
