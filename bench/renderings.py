"""Rendering benchmark: renderings proven per minute per proof slot, over the offline catalog,
beside the same proof of the unrendered missions in the same run, and the sandbox seconds a
served instance costs now that each one is a rendering of its own.

    python bench/renderings.py [--per-mission 10] [--cap 2] [--database-url postgresql://...]

For every code mission of the catalog, a planted bug that fails every test is the variant;
`--per-mission` random renderings of it are made and proven as a serve would need them
(gold with every test, the bug with the visible and hidden tests, the same tests failing as
before renaming), all at once on `--cap` proof slots, trusted (the catalog ships with
warmpool). A served instance then costs, in sandbox seconds, its share of the mission's gold
proof (over `retire_after` serves), of its variant's proof (over `bug_share` serves) and, but for
a bug's first serve (its identity rendering), its rendering's own proof; the same without
renderings is printed beside it.
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
from typing import NamedTuple

from bench.scratch import database_parser, proof_folder
from core.domains import Language, SabotagePolicy, load
from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from generation.renderings import Renderer, Rendering, Sources
from qa import renderings
from qa.policy import judge_sabotage
from qa.proof import Prover
from qa.results import ProofRun
from tests.support.proving import ensure_toolchain


class Variant(NamedTuple):
    sources: Sources
    # The bug's runs of the visible and the hidden tests, and the gold's of both: the mission's
    # and the variant's proofs, which a rendering's must match.
    reference: ProofRun
    hidden_reference: ProofRun
    gold_seconds: float


async def variant(prover: Prover, mission: CatalogMission) -> Variant:
    """The mission's first planted bug that fails every test, with its unrendered runs."""
    gold = await asyncio.gather(
        *(
            prover.run(mission.language, mission.gold_files, tests, trust="trusted")
            for tests in (mission.test_files, mission.hidden_test_files)
        )
    )
    for seed in range(1, 20):
        sabotage = saboteur.sabotage(mission, seed=seed, try_number=1)
        run, hidden = await asyncio.gather(
            *(
                prover.run(mission.language, sabotage.sabotaged_files, tests, trust="trusted")
                for tests in (mission.test_files, mission.hidden_test_files)
            )
        )
        if judge_sabotage(run, "all").accepted and hidden.conclusive:
            sources = Sources(
                gold_files=mission.gold_files,
                test_files=mission.test_files,
                sabotaged_files=sabotage.sabotaged_files,
                hidden_test_files=mission.hidden_test_files,
            )
            return Variant(sources, run, hidden, sum(each.duration_s for each in gold))
    raise SystemExit(f"{mission.slug}: no planted bug in 19 seeds fails every test")


async def prove_all(
    prover: Prover,
    work: list[tuple[CatalogMission, Rendering | Sources, Variant]],
    policy: dict[str, SabotagePolicy],
) -> tuple[float, list[renderings.RenderingProof]]:
    async def prove(
        mission: CatalogMission, files: Rendering | Sources, made: Variant
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
            reference=made.reference,
            hidden_reference=made.hidden_reference,
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
        slots=arguments.cap,
    )
    missions = [
        mission
        for mission in catalog.load()
        if mission.language != "none" and prover.availability(mission.language, "trusted") is None
    ]
    skipped = {m.language for m in catalog.load()} - {m.language for m in missions} - {"none"}
    draw = random.Random(arguments.seed)
    baseline: list[tuple[CatalogMission, Rendering | Sources, Variant]] = []
    rendered: list[tuple[CatalogMission, Rendering | Sources, Variant]] = []
    counts: dict[str, int] = {}
    render_seconds = 0.0
    for mission in missions:
        made = await variant(prover, mission)
        renderer = Renderer(
            made.sources, language=mission.language, domain=domains[mission.language].name
        )
        counts[mission.slug] = renderer.count
        baseline += [(mission, made.sources, made)] * arguments.baseline_per_mission
        started = time.perf_counter()
        numbers = draw.sample(range(renderer.count), arguments.per_mission)
        rendered += [(mission, renderer.render(number), made) for number in numbers]
        render_seconds += time.perf_counter() - started
    baseline_wall, baseline_proofs = await prove_all(prover, baseline, policy)
    rendered_wall, rendered_proofs = await prove_all(prover, rendered, policy)
    await prover.close()

    slots = arguments.cap
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
    sandbox: dict[Language, list[float]] = defaultdict(list)
    for (mission, _, _), proof in zip(rendered, rendered_proofs, strict=True):
        sandbox[mission.language].append(proof.gold.duration_s + proof.sabotage.duration_s)
    print("sandbox seconds per served instance (the mission's proof over retire_after serves,")
    print("  the variant's over bug_share, then each serve's rendering but a bug's first):")
    for language, seconds in sorted(sandbox.items()):
        domain = domains[language]
        made_here = [made for mission, _, made in rendered if mission.language == language]
        gold = sum(made.gold_seconds for made in made_here) / len(made_here)
        bug = sum(
            made.reference.duration_s + made.hidden_reference.duration_s for made in made_here
        ) / len(made_here)
        rendering = sum(seconds) / len(seconds)
        before = gold / domain.retire_after + bug / domain.bug_share
        now = before + rendering * (domain.bug_share - 1) / domain.bug_share
        print(
            f"  {language:<11} {rendering:.2f} s a rendering; {now:.2f} s an instance, "
            f"{before:.2f} s without renderings (bug_share {domain.bug_share}, "
            f"retire_after {domain.retire_after})"
        )
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of this benchmark that bench/generation.py, which runs it too, takes."""
    parser.add_argument("--per-mission", type=int, default=10)
    parser.add_argument("--baseline-per-mission", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--cap", type=int, default=2, help="proof slots")
    add_arguments(parser)
    asyncio.run(main(parser.parse_args()))
