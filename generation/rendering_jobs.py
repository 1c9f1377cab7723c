"""Rendering jobs: the renderings a variant lacks, made ahead of demand, proven, stored.

The replenisher orders one for a live variant whose ready renderings hold fewer serves than it
has left. The job renders the variant under numbers that no other rendering of the mission has
(at most RENDERINGS_PER_JOB of them), proves each in the sandbox against the variant's own runs
(`qa.renderings`: the gold passes, the bug fails exactly the tests it failed before renaming),
and stores them in its final transaction: those proven ready to serve once each, the others
discarded with their proof. No model is called, so a rendering costs only sandbox time; a job
none of whose renderings passed fails, and the replenisher stops ordering for a variant whose
rendering jobs keep failing.
"""

from __future__ import annotations

import asyncio
import random

from core.domains import Domain
from core.sql import Connection
from generation.finisher import Ending, Failed, Finished
from generation.jobs import ClaimedJob
from generation.renderings import Renderer, Rendering, RenderingFailed, Sources
from generation.worker import GenerationFailed
from qa import rendered, renderings
from qa.proof import ProofUnavailable, Prover
from qa.rendered import ProvenRendering, VariantToRender
from qa.results import Trust

# Enough for a variant of the default bug_share in one job, and few enough that the job's
# proofs end well within the stuck limit on a worker's proof slots.
RENDERINGS_PER_JOB = 10
# How many free numbers each new rendering is chosen from.
CANDIDATES = 64


async def render(
    job: ClaimedJob, domain: Domain, variant: VariantToRender, prover: Prover, trust: Trust
) -> Ending:
    wanted = min(variant.lacking, RENDERINGS_PER_JOB)
    if wanted == 0:
        return Finished(status="completed", mission_id=variant.mission_id)
    sources = Sources(
        gold_files=variant.gold_files,
        test_files=variant.test_files,
        sabotaged_files=variant.sabotaged_files,
        hidden_test_files=variant.hidden_test_files,
    )
    try:
        renderer = Renderer(sources, language=domain.language, domain=domain.name)
        numbers = await asyncio.to_thread(
            distant_numbers, renderer, variant.numbers_taken, wanted, seed=job.id
        )
        if not numbers:
            raise GenerationFailed(
                f"mission {variant.mission_id} has no rendering left to make: all "
                f"{renderer.count} of its renderings are stored"
            )
        made = await asyncio.to_thread(lambda: [renderer.render(n) for n in numbers])
    except RenderingFailed as error:
        raise GenerationFailed(
            f"mission {variant.mission_id} cannot be rendered: {error}"
        ) from error

    async def prove(rendering: Rendering) -> ProvenRendering:
        proof = await renderings.prove(
            prover,
            language=domain.language,
            trust=trust,
            must_fail=domain.sabotage_must_fail,
            gold_files=rendering.gold_files,
            test_files=rendering.test_files,
            sabotaged_files=rendering.sabotaged_files,
            hidden_test_files=rendering.hidden_test_files,
            reference=variant.reference,
            hidden_reference=variant.hidden_reference,
        )
        return ProvenRendering(
            number=rendering.number,
            gold_files=rendering.gold_files,
            test_files=rendering.test_files,
            hidden_test_files=rendering.hidden_test_files,
            sabotaged_files=rendering.sabotaged_files,
            proof=proof,
        )

    try:
        # A task group: once one proof cannot run, the others are stopped, so no sandbox
        # outlives the job.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(prove(rendering)) for rendering in made]
    except* ProofUnavailable as unavailable:
        raise GenerationFailed(str(unavailable.exceptions[0])) from None
    proven = [task.result() for task in tasks]

    async def store(connection: Connection) -> Finished | Failed:
        ready = await rendered.store(connection, variant, proven)
        if ready:
            return Finished(status="completed", mission_id=variant.mission_id)
        refused = [each.proof.reason for each in proven if not each.proof.accepted]
        if refused:
            return Failed(
                f"no rendering of variant {variant.id} passed its proof ({len(refused)} "
                f"discarded); the first: {refused[0]}"
            )
        return Failed(f"every number drawn for variant {variant.id} was taken meanwhile")

    return store


def distant_numbers(
    renderer: Renderer, taken: frozenset[int], wanted: int, *, seed: int
) -> list[int]:
    """Up to `wanted` rendering numbers not `taken`, drawn from `seed` (a job drawing again
    after a restart draws the same). Each is the farthest of up to CANDIDATES free numbers from
    the mission's renderings so far (its identity among them): the one that renames differently
    the most names of the rendering closest to it. The renderings of a mission then differ in as
    many names as its vocabulary allows, so that a fragment of one names it."""
    draw = random.Random(f"renderings:{seed}")
    made = [{}, *(renderer.renames(number) for number in sorted(taken))]
    chosen: list[int] = []
    for _ in range(wanted):
        free = renderer.count - len(taken) - len(chosen)
        if free <= 0:
            break
        if free <= CANDIDATES:
            candidates = [n for n in range(renderer.count) if n not in taken and n not in chosen]
        else:
            candidates = sorted(
                {draw.randrange(renderer.count) for _ in range(CANDIDATES)} - taken - set(chosen)
            )
        best = max(
            candidates,
            key=lambda number: min(_differences(renderer.renames(number), other) for other in made),
            default=None,
        )
        if best is None:
            continue
        chosen.append(best)
        made.append(renderer.renames(best))
    return chosen


def _differences(renames: dict[str, str], other: dict[str, str]) -> int:
    """How many names two renderings write differently."""
    return sum(renames.get(name) != other.get(name) for name in renames.keys() | other.keys())
