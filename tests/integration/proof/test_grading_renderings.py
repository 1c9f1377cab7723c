"""Grading an instance served a rendering of its own, end to end: a grader reads the gold in
the instance's rendering; graded in the sandbox against that rendering's visible and hidden
tests, that gold passes and the instance's own files, unchanged, fail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from generation import gradings
from generation.grader import Grader
from qa.proof import Prover
from server.auth import Role
from tests.support.http import bearer
from tests.support.proving import require
from tests.support.rendered_pool import TRACK, rendered_pool
from tests.support.serving import serve_all

Client = AsyncTestClient[Litestar]
MINUTE = timedelta(minutes=1)
pytestmark = pytest.mark.usefixtures("standing_worker")


async def graded(
    client: Client,
    pool: asyncpg.Pool,
    prover: Prover,
    key: str,
    instance_id: int,
    files: dict[str, str],
    idempotency_key: str,
) -> dict[str, Any]:
    """A submission of `files` for the instance, graded by a grader of this test's prover."""
    sent = await client.post(
        f"/v1/instances/{instance_id}/submissions",
        json={"files": files},
        headers={
            **bearer(key),
            "Idempotency-Key": idempotency_key,
        },
    )
    assert sent.status_code == 202, sent.text
    grader = Grader(
        pool,
        prover,
        worker_id="test-grader",
        capacity=1,
        global_cap=1,
        languages=["python"],
        heartbeat_timeout=MINUTE,
        pending_expiry=10 * MINUTE,
        time_limit_s=30,
    )
    assert await grader.run_once()
    await grader.stop(grace_seconds=120)
    submission_id = sent.json()["submission"]["id"]
    answer = await client.get(f"/v1/submissions/{submission_id}", headers=bearer(key))
    submission: dict[str, Any] = answer.json()
    return submission


async def test_a_renamed_instance_is_graded_against_its_own_rendering(
    client: Client, pool: asyncpg.Pool, prover: Prover, keys: dict[Role, str]
) -> None:
    require(prover, "python", "untrusted")
    the_map = await rendered_pool(pool, prover, missions=1, retire_after=5)
    # The standing worker grades python too: submissions are admitted.
    await gradings.say_what_worker_grades(
        pool, "standing-worker", "standing-worker:standing:0", ["python"], {}
    )
    answers = await serve_all(pool, the_map, [f"user-{n}" for n in range(5)], track=TRACK)
    renamed_id = await pool.fetchval(
        """SELECT i.id FROM mission_instances i JOIN mission_renderings r ON r.id = i.rendering_id
           WHERE r.renderer = 'renamed' ORDER BY i.id LIMIT 1"""
    )
    [instance] = [a.instance for a in answers if a.instance and a.instance.id == renamed_id]

    view = await client.get(f"/v1/qa/instances/{instance.id}", headers=bearer(keys["qa_reviewer"]))
    assert view.status_code == 200, view.text
    gold = view.json()["gold_files"]
    rendering = await pool.fetchrow(
        """SELECT r.gold_files, r.test_files, r.hidden_test_files, m.gold_files AS mission_gold,
                  m.hidden_test_files AS mission_hidden
           FROM mission_renderings r JOIN missions m ON m.id = r.mission_id WHERE r.id = (
               SELECT rendering_id FROM mission_instances WHERE id = $1)""",
        renamed_id,
    )
    assert rendering is not None
    assert gold == rendering["gold_files"] != rendering["mission_gold"], "the gold, renamed"
    assert rendering["hidden_test_files"] != rendering["mission_hidden"], "hidden tests renamed"
    code = {path: text for path, text in instance.files.items() if path in gold}

    candidate = keys["candidate_app"]
    fixed = await graded(client, pool, prover, candidate, instance.id, gold, "fixed")
    assert (fixed["status"], fixed["error"]) == ("passed", None)
    assert fixed["hidden_tests"]["passed"] == fixed["hidden_tests"]["total"] > 0
    # The mission's own gold, in names this instance does not have, fails its tests.
    unchanged = await graded(client, pool, prover, candidate, instance.id, code, "unchanged")
    assert unchanged["status"] == "failed"
