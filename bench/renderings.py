"""Rendering benchmark: renderings proven per minute per proof slot, over the offline catalog,
beside the same proof of the unrendered missions in the same run.

    python bench/renderings.py [--per-mission 10] [--slots 2] [--database-url postgresql://...]

For every code mission of the catalog, a planted bug that fails every test is the variant;
`--per-mission` random renderings of it are made and proven as a serve would need them
(gold with every test, the bug with the visible tests, the same tests failing as before
renaming), all at once on `--slots` proof slots, trusted (the catalog ships with warmpool).
The baseline proves the unrendered variant the same way, so the ratio says what renaming costs
a proof (nothing but the renaming itself, if near 1). Every rendering must be accepted: the
benchmark is also the long form of tests/integration/proof/test_renderings_proof.py. Needs the
toolchain (scripts/toolchain) and, for SQL, a Postgres with pgTAP.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import os
import random
import time
from collections import defaultdict

from bench.generation import proof_folder
from bench.scratch import database_parser
from core.domains import SabotagePolicy, load
from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from generation.renderings import Renderer, Rendering, Sources
from qa import renderings
from qa.policy import judge_sabotage
from qa.proof import Prover
from qa.results import ProofRun
from tests.support.proving import ensure_toolchain


async def variant(prover: Prover, mission: CatalogMission) -> tuple[Sources, ProofRun]:
    """The mission's first planted bug that fails every test, and its unrendered run."""
    for seed in range(1, 20):
        sabotage = saboteur.sabotage(mission, seed=seed, try_number=1)
        run = await prover.run(
            mission.language, sabotage.sabotaged_files, mission.test_files, trust="trusted"
        )
        if judge_sabotage(run, "all").accepted:
            sources = Sources(
                gold_files=mission.gold_files,
                test_files=mission.test_files,
                sabotaged_files=sabotage.sabotaged_files,
            )
            return sources, run
    raise SystemExit(f"{mission.slug}: no planted bug in 19 seeds fails every test")


async def prove_all(
    prover: Prover,
    work: list[tuple[CatalogMission, Rendering | Sources, ProofRun]],
    policy: dict[str, SabotagePolicy],
) -> tuple[float, list[renderings.RenderingProof]]:
    async def prove(
        mission: CatalogMission, files: Rendering | Sources, reference: ProofRun
    ) -> renderings.RenderingProof:
        return await renderings.prove(
            prover,
            language=mission.language,
            trust="trusted",
            must_fail=policy[mission.language],
            gold_files=files.gold_files,
            test_files=files.test_files,
            sabotaged_files=files.sabotaged_files,
            hidden_test_files=files.hidden_test_files,
            reference=reference,
        )

    start = time.perf_counter()
    proofs = await asyncio.gather(*(prove(*item) for item in work))
    return time.perf_counter() - start, proofs


async def main(arguments: argparse.Namespace) -> None:
    domain_map = load(ROOT / "domain_map.yaml")
    domains = {domain.language: domain for domain in reversed(domain_map.domains.values())}
    policy: dict[str, SabotagePolicy] = {
        language: domain.sabotage_must_fail for language, domain in domains.items()
    }
    prover = await Prover.start(
        work_root=proof_folder(),
        toolchain_root=await asyncio.to_thread(ensure_toolchain),
        postgres_admin_url=arguments.database_url,
        slots=arguments.slots,
    )
    missions = [
        mission
        for mission in catalog.load()
        if mission.language != "none" and prover.availability(mission.language, "trusted") is None
    ]
    skipped = {m.language for m in catalog.load()} - {m.language for m in missions} - {"none"}
    draw = random.Random(arguments.seed)
    baseline: list[tuple[CatalogMission, Rendering | Sources, ProofRun]] = []
    rendered: list[tuple[CatalogMission, Rendering | Sources, ProofRun]] = []
    counts: dict[str, int] = {}
    render_seconds = 0.0
    for mission in missions:
        sources, reference = await variant(prover, mission)
        renderer = Renderer(
            sources, language=mission.language, domain=domains[mission.language].name
        )
        counts[mission.slug] = renderer.count
        baseline += [(mission, sources, reference)] * arguments.baseline_per_mission
        started = time.perf_counter()
        numbers = draw.sample(range(renderer.count), arguments.per_mission)
        rendered += [(mission, renderer.render(number), reference) for number in numbers]
        render_seconds += time.perf_counter() - started
    baseline_wall, baseline_proofs = await prove_all(prover, baseline, policy)
    rendered_wall, rendered_proofs = await prove_all(prover, rendered, policy)
    await prover.close()

    slots = arguments.slots
    per_slot = len(rendered) / rendered_wall * 60 / slots
    baseline_per_slot = len(baseline) / baseline_wall * 60 / slots
    print(f"\n{len(missions)} missions, {slots} proof slots, {os.cpu_count()} cores")
    if skipped:
        print(f"skipped (no proof tools here): {', '.join(sorted(skipped))}")
    print(
        f"renderings per mission available: min {min(counts.values()):,}, "
        f"median {sorted(counts.values())[len(counts) // 2]:,}"
    )
    print(f"rendering (renaming alone): {render_seconds / len(rendered) * 1000:.1f} ms each")
    print(
        f"baseline, unrendered: {len(baseline)} proven in {baseline_wall:.1f} s, "
        f"{baseline_per_slot:.1f} per minute per slot"
    )
    print(
        f"rendered: {len(rendered)} proven in {rendered_wall:.1f} s, "
        f"{per_slot:.1f} per minute per slot ({per_slot / baseline_per_slot:.2f}x the baseline)"
    )
    sandbox: dict[str, list[float]] = defaultdict(list)
    for (mission, _, _), proof in zip(rendered, rendered_proofs, strict=True):
        sandbox[mission.language].append(proof.gold.duration_s + proof.sabotage.duration_s)
    for language, seconds in sorted(sandbox.items()):
        print(f"  {language:<11} sandbox seconds per rendering: {sum(seconds) / len(seconds):.2f}")
    refused = [
        (item[0].slug, proof.reason)
        for item, proof in zip(
            [*baseline, *rendered], [*baseline_proofs, *rendered_proofs], strict=True
        )
        if not proof.accepted
    ]
    for slug, reason in refused:
        print(f"REFUSED {slug}: {reason}")
    if refused:
        raise SystemExit(f"{len(refused)} proofs refused")
    print("every rendering proven: gold passes, the same tests fail as before renaming")


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--per-mission", type=int, default=10)
    parser.add_argument("--baseline-per-mission", type=int, default=2)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    asyncio.run(main(parser.parse_args()))
