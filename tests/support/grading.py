"""Grading over HTTP: an approved mission with real code and hidden tests, served to users, and
submissions sent and waited on; what a grading worker's sandbox uids are, from its log. For
the grading queue alone: submissions as admission leaves them, and a gated stand-in for the
sandbox."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from core.domains import Domain
from qa.proof import ProofUnavailable, Prover
from qa.results import ProofRun, Trust
from tests.support.missions import serve_identity_as_often_as_its_variant
from tests.support.polling import eventually
from tests.support.proven_missions import store_mission

DOMAIN_MAP = """
tracks:
  backend-engineer: [python-backend]
  marketing-manager: [marketing-copy]
domains:
  python-backend:
    kind: technical
    language: python
    target: 0
    review: proof
    # One mission's one bug serves every candidate of a test.
    bug_share: 100
  marketing-copy:
    kind: non_technical
    language: none
    target: 0
"""
PYTHON = Domain(
    name="python-backend",
    kind="technical",
    language="python",
    target=0,
    retire_after=100,
    review="proof",
    bug_share=100,
)
COPY = Domain(
    name="marketing-copy", kind="non_technical", language="none", target=0, retire_after=50
)
# Right for the visible tests' inputs only.
HARD_CODED = (
    "def total(prices, discount):\n"
    "    if discount == 0.5:\n"
    "        return 5\n"
    "    return sum(prices)\n"
)
DONE = ("passed", "failed", "error")


def domain_map(folder: Path) -> Path:
    path = folder / "domain_map.yaml"
    path.write_text(DOMAIN_MAP, encoding="utf-8")
    return path


async def stock(pool: asyncpg.Pool, domain: Domain = PYTHON) -> int:
    """An approved mission of `domain` (by its proof, or by a reviewer for copy), served to as
    many users as a test likes from its one rendering."""
    mission_id = await store_mission(pool, domain)
    await pool.execute("UPDATE missions SET qa_status = 'approved' WHERE id = $1", mission_id)
    await serve_identity_as_often_as_its_variant(pool, mission_id)
    return mission_id


def bearer(key: str, idempotency_key: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return headers


async def serve(
    client: httpx.AsyncClient, key: str, user: str, track: str = "backend-engineer"
) -> dict[str, Any]:
    answer = await client.post(
        "/v1/serve", json={"user_id": user, "track": track}, headers=bearer(key)
    )
    assert answer.status_code == 200, answer.text
    instance: dict[str, Any] = answer.json()["instance"]
    return instance


async def submit(
    client: httpx.AsyncClient, key: str, instance_id: str, files: dict[str, str], idem: str
) -> httpx.Response:
    return await client.post(
        f"/v1/instances/{instance_id}/submissions",
        json={"files": files},
        headers=bearer(key, idem),
    )


async def verdict(
    client: httpx.AsyncClient, key: str, submission_id: str, within: float = 120
) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        answer = await client.get(f"/v1/submissions/{submission_id}", headers=bearer(key))
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body if body["status"] in DONE else None

    return await eventually(done, within, f"submission {submission_id}'s verdict", every=0.1)


async def graded(
    client: httpx.AsyncClient, key: str, instance_id: str, files: dict[str, str], idem: str
) -> dict[str, Any]:
    answer = await submit(client, key, instance_id, files, idem)
    assert answer.status_code == 202, answer.text
    return await verdict(client, key, answer.json()["submission"]["id"])


async def graders_ready(pool: asyncpg.Pool, count: int = 1, within: float = 90) -> None:
    """Once `count` workers grade python (each starts its grading prover in the background)."""

    async def ready() -> bool:
        found = await pool.fetchval(
            "SELECT count(*) FROM workers WHERE 'python' = ANY(grading_languages)"
        )
        return bool(found >= count)

    await eventually(ready, within, f"{count} worker(s) grading python", every=0.2)


def slot_uids(log: Path, prover: str = "grading") -> list[int]:
    """The sandbox uids of a prover's slots (`grading`, `generation`), from a worker's JSON
    log."""
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("prover") == prover and "slot_uids" in record:
                return [int(uid) for uid in record["slot_uids"] if uid is not None]
    raise AssertionError(f"no start line of the {prover} prover in {log}")


_users = itertools.count(1)


async def instance_of(
    pool: asyncpg.Pool, mission_id: int, user: str, variant_id: int | None = None
) -> int:
    """An instance of the mission served to `user`, as the pool would leave it."""
    instance_id: int = await pool.fetchval(
        """INSERT INTO mission_instances (mission_id, user_id, track, domain, language, title,
               brief, files, serve_number, variant_id)
           SELECT id, $2, 'backend-engineer', domain, language, title, brief,
                  sabotaged_files || test_files,
                  (SELECT count(*) + 1 FROM mission_instances WHERE mission_id = $1), $3
           FROM missions WHERE id = $1
           RETURNING id""",
        mission_id,
        user,
        variant_id,
    )
    return instance_id


async def pending_submission(pool: asyncpg.Pool, mission_id: int) -> int:
    """A submission of a user of its own, waiting for a grader, as admission leaves it."""
    user = f"candidate-{next(_users)}"
    instance_id = await instance_of(pool, mission_id, user)
    submission_id: int = await pool.fetchval(
        """INSERT INTO submissions (instance_id, mission_id, user_id, language,
               instance_created_at, caller, idempotency_key, fingerprint, files, code_files,
               visible_test_files, hidden_test_files)
           SELECT i.id, i.mission_id, i.user_id, 'python', i.created_at, 'test', $2, '\\x00',
                  '{}', '{}', '{"test_pricing.py": ""}', '{"test_more.py": ""}'
           FROM mission_instances i WHERE i.id = $1
           RETURNING id""",
        instance_id,
        user,
    )
    return submission_id


class GatedProver(Prover):
    """Stands in for the sandbox where only the grading queue is under test: each run waits
    for the gate (its own, or the shared one), then finds the language cannot be proven here,
    so the grading ends as an `error` verdict that names the gate."""

    def __init__(self, name: str = "gate") -> None:  # no slots, uids or databases to hold
        self.name = name
        self.gate = asyncio.Event()
        self.running = 0
        self.highest = 0
        self.cancelled = 0
        self.started = asyncio.Event()

    async def run(
        self,
        language: str,
        solution_files: Mapping[str, str],
        test_files: Mapping[str, str],
        *,
        trust: Trust,
    ) -> ProofRun:
        self.running += 1
        self.highest = max(self.highest, self.running)
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        raise ProofUnavailable(f"{self.name} opened")
