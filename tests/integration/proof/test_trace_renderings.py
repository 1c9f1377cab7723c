"""Tracing leaks of instances that rendering jobs made and proved, in each language with code:
each instance's files, and a reformatted 20-line fragment of one of them, trace back to that
instance first; a file of a mission the pool does not hold traces to nothing."""

from __future__ import annotations

import json

import asyncpg
import pytest

from generation.offline import catalog
from qa import trace
from qa.proof import Prover
from tests.support.leaks import longest_file, reformatted_fragment
from tests.support.proving import require
from tests.support.rendered_pool import TRACK, rendered_pool
from tests.support.serving import serve_all

pytestmark = pytest.mark.usefixtures("standing_worker")


def telling_fragment(files: dict[str, str], others: list[dict[str, str]]) -> str:
    """The 20 lines of one of `files` (not blank) that differ in the most lines from the same
    file of the other instances of the mission, counting the closest of them: what a leak of
    this instance alone holds. It must differ from each of them somewhere."""
    best, best_score = "", -1
    for path, text in files.items():
        lines = [line for line in text.splitlines() if line.strip()]
        theirs = [set(other[path].splitlines()) for other in others]
        for start in range(len(lines) - 19):
            window = lines[start : start + 20]
            score = min((sum(line not in their for line in window) for their in theirs), default=0)
            if score > best_score:
                best, best_score = "\n".join(window), score
    assert best_score > 0, "some 20 lines of the instance are its own"
    return best


@pytest.mark.parametrize("language", ["python", "javascript", "sql"])
async def test_each_instance_and_a_fragment_of_it_trace_back_to_that_instance_first(
    pool: asyncpg.Pool, prover: Prover, language: str
) -> None:
    require(prover, language, "trusted")
    # Two missions of one bug, served five times each: the identity and four renderings.
    the_map = await rendered_pool(pool, prover, missions=2, retire_after=5, language=language)
    answers = await serve_all(pool, the_map, [f"user-{n}" for n in range(10)], track=TRACK)
    instances = [answer.instance for answer in answers if answer.instance is not None]
    assert len(instances) == 10
    assert len({json.dumps(instance.files, sort_keys=True) for instance in instances}) == 10
    renamed = await pool.fetchval(
        """SELECT count(*) FROM mission_instances i JOIN mission_renderings r
           ON r.id = i.rendering_id WHERE r.renderer = 'renamed' AND r.proof->>'accepted' = 'true'"""
    )
    assert renamed == 8

    for instance in instances:
        others = [
            i.files for i in instances if i.mission_id == instance.mission_id and i != instance
        ]
        for text in (
            json.dumps(instance.files),
            reformatted_fragment(telling_fragment(instance.files, others), language=language),
        ):
            matches = await trace.trace(pool, text)
            assert matches, text
            best = matches[0]
            assert (best.instance_id, best.mission_id, best.variant_id, best.user_id) == (
                instance.id,
                instance.mission_id,
                instance.variant_id,
                instance.user_id,
            )
            assert best.score > max((match.score for match in matches[1:]), default=0)

    stored = {
        json.dumps(row["gold_files"], sort_keys=True)
        for row in await pool.fetch("SELECT gold_files FROM missions")
    }
    other = next(
        mission
        for mission in catalog.load()
        if mission.language == language
        and json.dumps(mission.gold_files, sort_keys=True) not in stored
    )
    assert await trace.trace(pool, longest_file({**other.gold_files, **other.test_files})) == []
