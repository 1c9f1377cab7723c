"""Renderings as the pool stores them: what a rendering job reads of a variant, and its proven
renderings stored, each served once.

A rendering that passed its proof (`qa.renderings`) is stored ready, with the whole mission in
its names (the files a candidate receives, the gold, the visible and hidden tests that grading
runs) and fingerprinted for tracing; its variant's `rendered_serves` grows by one, which is
what serving and the pool's supply read. One that failed is kept with its proof, discarded:
never served, never traced."""

from __future__ import annotations

import msgspec

from core.sql import Executor, Queries
from qa import trace
from qa.missions import Files, MissionProof
from qa.renderings import RenderingProof
from qa.results import ProofRun

queries = Queries("qa")

# The renderer of a rendering of its own: the mission's identifiers renamed.
RENAMED = "renamed"


class VariantToRender(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    mission_id: int
    gold_files: Files
    test_files: Files
    hidden_test_files: Files
    sabotaged_files: Files
    # The variant's accepted sabotage run, and its run of the hidden tests (if it has one):
    # a rendering's bug must fail exactly the same tests.
    reference: ProofRun
    hidden_reference: ProofRun | None
    # Renderings it needs before its serves are all rendered.
    lacking: int
    # The numbers the mission's renderings have taken, which no new one may reuse.
    numbers_taken: frozenset[int]


class ProvenRendering(msgspec.Struct, frozen=True, kw_only=True):
    number: int
    gold_files: Files
    test_files: Files
    hidden_test_files: Files
    sabotaged_files: Files
    proof: RenderingProof


async def to_render(connection: Executor, variant_id: int) -> VariantToRender | None:
    """The variant, while it is live in a served mission whose proof has a sabotage run."""
    row = await connection.fetchrow(queries["variant_to_render"], variant_id)
    if row is None:
        return None
    proof = msgspec.convert(row["proof"], MissionProof)
    if not proof.sabotage_tries:
        return None  # a flaw in prose: nothing was run, nothing can be rendered
    return VariantToRender(
        id=row["id"],
        mission_id=row["mission_id"],
        gold_files=row["gold_files"],
        test_files=row["test_files"],
        hidden_test_files=row["hidden_test_files"],
        sabotaged_files=row["sabotaged_files"],
        reference=proof.sabotage_tries[-1],
        hidden_reference=proof.hidden_sabotage,
        lacking=max(row["lacking"], 0),
        numbers_taken=frozenset(row["numbers_taken"]),
    )


async def store(
    connection: Executor, variant: VariantToRender, renderings: list[ProvenRendering]
) -> int:
    """Store each rendering under its number, unless another job took the number first; how
    many were stored ready. Call inside a transaction."""
    ready = 0
    for rendering in renderings:
        accepted = rendering.proof.accepted
        stored = await connection.fetchval(
            queries["rendering_insert_unless_number_taken"],
            variant.id,
            variant.mission_id,
            rendering.number,
            rendering.sabotaged_files | rendering.test_files,
            rendering.gold_files,
            rendering.test_files,
            rendering.hidden_test_files,
            rendering.proof,
            "ready" if accepted else "discarded",
        )
        ready += stored is not None and accepted
    if ready:
        await connection.execute(queries["mission_lock_before_its_variant"], variant.mission_id)
        await connection.execute(queries["variant_add_rendered_serves"], variant.id, ready)
        await trace.fingerprint_renderings_of(connection, variant.id)
    return ready
