"""Renderings made ahead of demand: the replenisher orders, for each live variant, the
renderings its share needs; each rendering job renders the variant under numbers of its own,
proves every rendering with the real prover and stores those proven, served once each, and
those refused, discarded. Then 200 users served at once get instances that no two share."""

from __future__ import annotations

import json
from collections import Counter

import asyncpg
import pytest

from generation.drafts import MissionDraft, SabotageDraft
from pool.replenish import Replenisher
from qa.proof import Prover
from tests.support.jobs import LIMITS, enqueue
from tests.support.pipelines import run_pending
from tests.support.providers import Scripted
from tests.support.proving import require
from tests.support.rendered_pool import (
    HEARTBEAT_TIMEOUT,
    TRACK,
    pipeline,
    rendered_pool,
    shares_map,
)
from tests.support.serving import serve_all

pytestmark = pytest.mark.usefixtures("standing_worker")


# 4 missions, 16 more bugs and 80 renderings, each proven in the sandbox: about 220 runs on
# two proof slots, half a minute on a quiet machine.
@pytest.mark.heavy
@pytest.mark.timeout(600)
async def test_200_users_at_once_get_instances_no_two_of_which_share_their_files(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    the_map = await rendered_pool(pool, prover, missions=4, retire_after=25)
    missions = await pool.fetch("SELECT id FROM missions WHERE qa_status = 'approved'")
    assert len(missions) == 4

    answers = await serve_all(pool, the_map, [f"candidate-{n}" for n in range(200)], track=TRACK)

    instances = [answer.instance for answer in answers if answer.instance is not None]
    assert len(instances) == 100, "exactly the stock: 4 missions of 25 serves"
    assert Counter(i.mission_id for i in instances) == {m["id"]: 25 for m in missions}
    assert max(Counter(i.variant_id for i in instances).values()) <= 5
    assert len({(i.mission_id, i.user_id) for i in instances}) == 100
    by_mission: dict[int, set[str]] = {}
    for instance in instances:
        by_mission.setdefault(instance.mission_id, set()).add(
            json.dumps(instance.files, sort_keys=True)
        )
    assert {mission: len(files) for mission, files in by_mission.items()} == {
        m["id"]: 25 for m in missions
    }, "no two instances of one mission share their files"
    # Every served rendering has a passing proof on record: the variant's own for its identity
    # rendering, its own sandboxed runs for a renamed one.
    served = await pool.fetch(
        """SELECT r.renderer, r.status, r.serve_count, r.proof AS rendering_proof,
                  v.proof AS variant_proof
           FROM mission_instances i JOIN mission_renderings r ON r.id = i.rendering_id
           JOIN mission_variants v ON v.id = r.variant_id"""
    )
    assert len(served) == 100
    assert Counter(row["renderer"] for row in served) == {"identity": 20, "renamed": 80}
    for row in served:
        assert (row["status"], row["serve_count"]) == ("ready", 1)
        variant = row["variant_proof"]
        gold, sabotage = variant["gold"], variant["sabotage_tries"][-1]
        if row["renderer"] == "renamed":
            assert row["rendering_proof"]["accepted"] is True, row["rendering_proof"]["reason"]
            gold, sabotage = row["rendering_proof"]["gold"], row["rendering_proof"]["sabotage"]
        assert gold["conclusive"]
        assert gold["passed"] == gold["total"] > 0
        assert sabotage["conclusive"]
        # Every visible test broken (sabotage_must_fail: all), the hidden ones as before.
        broken = {
            test["id"]: test["outcome"] in ("failed", "errored") for test in sabotage["tests"]
        }
        visible = {test["id"]: True for test in variant["sabotage_tries"][-1]["tests"]}
        hidden = {
            test["id"]: test["outcome"] in ("failed", "errored")
            for test in variant["hidden_sabotage"]["tests"]
        }
        assert broken == (visible if row["renderer"] == "identity" else visible | hidden)


# A mission that looks its function up by a name spelled in pieces: the renamer cannot see
# that use, so a rendering that renames `total` breaks the gold; one that renames only
# `prices` does not.
SPELLED = MissionDraft(
    title="Basket totals",
    brief="`basket.py` totals a basket.",
    gold_files={"basket.py": "def total(prices):\n    return sum(prices)\n"},
    test_files={
        "test_basket.py": (
            "import basket\n\n"
            "def test_two_items():\n    assert getattr(basket, 'to' + 'tal')([2, 3]) == 5\n\n"
            "def test_one_item():\n    assert getattr(basket, 'to' + 'tal')([7]) == 7\n"
        )
    },
    hidden_test_files={
        "test_basket_more.py": (
            "import basket\n\n"
            "def test_three_items():\n    assert getattr(basket, 'to' + 'tal')([1, 2, 4]) == 7\n"
        )
    },
)
ONE_TOO_MANY = SabotageDraft(
    sabotaged_files={"basket.py": "def total(prices):\n    return sum(prices) + 1\n"},
    bug_summary="the total is one too high",
    grader_hint="look at the return",
)


async def test_a_rendering_that_fails_its_proof_is_discarded_and_never_served(
    pool: asyncpg.Pool, prover: Prover
) -> None:
    require(prover, "python", "trusted")
    the_map = shares_map(retire_after=5)
    make = pipeline(pool, prover, the_map, Scripted(SPELLED, [ONE_TOO_MANY]))
    await enqueue(pool, None)
    await run_pending(pool, make)
    replenisher = Replenisher(
        pool, the_map, LIMITS, max_per_pass=5, heartbeat_timeout=HEARTBEAT_TIMEOUT
    )
    second = await replenisher.run_once()
    [rendering_job] = [job for each in second.domains for job in each.rendering_jobs]
    await run_pending(pool, make)

    rows = await pool.fetch(
        """SELECT status, number, proof, max_serves, fingerprinted_at IS NOT NULL AS traced,
                  files->>'basket.py' AS code
           FROM mission_renderings WHERE renderer = 'renamed' ORDER BY id"""
    )
    # Four of the mission's five renderings were drawn: those renaming `total` are discarded.
    assert len(rows) == 4
    by_status = Counter(row["status"] for row in rows)
    assert by_status["discarded"] >= 2, by_status
    assert by_status["ready"] >= 1, by_status
    for row in rows:
        assert row["proof"]["accepted"] is (row["status"] == "ready")
        assert ("def total(" in row["code"]) is (row["status"] == "ready"), row["code"]
        assert row["traced"]
        assert row["max_serves"] == 1
    job = await pool.fetchrow(
        "SELECT status, error FROM generation_jobs WHERE id = $1", int(rendering_job)
    )
    assert job is not None
    assert job["status"] == "completed", job["error"]
    # The variant holds its identity rendering and the proven ones: that many serves, no more.
    ready = 1 + by_status["ready"]
    assert await pool.fetchval("SELECT rendered_serves FROM mission_variants") == ready
    answers = await serve_all(pool, the_map, [f"user-{n}" for n in range(5)], track=TRACK)
    instances = [answer.instance for answer in answers if answer.instance is not None]
    assert len(instances) == ready
    assert all("def total(" in instance.files["basket.py"] for instance in instances)
    assert len({json.dumps(i.files, sort_keys=True) for i in instances}) == ready
    discarded = await pool.fetchval(
        """SELECT count(*) FROM mission_instances i JOIN mission_renderings r
           ON r.id = i.rendering_id WHERE r.status <> 'ready'"""
    )
    assert discarded == 0
