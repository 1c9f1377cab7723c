"""Admission of submissions, with no grader running: the per-user cap, the pending limit, a
language no live worker can grade, and what a pending submission says of its place in line."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.app import create_app
from server.auth import Role
from server.grading_runtime import running_grader
from server.settings import Settings
from tests.support.grading import PYTHON, stock
from tests.support.http import assert_problem, bearer
from tests.support.polling import eventually

Client = AsyncTestClient[Litestar]


async def grader_row(pool: asyncpg.Pool, languages: list[str], disabled: dict[str, str]) -> None:
    await pool.execute(
        """INSERT INTO workers (name, worker_id, started_at, heartbeat_at, slots, domains,
               disabled, grading_languages, grading_disabled)
           VALUES ('grader', 'grader:standing:0', now(), now() + interval '1 day', 0, '{}',
                   '{}', $1, $2)""",
        languages,
        disabled,
    )


@pytest.fixture
async def small(settings: Settings) -> AsyncIterator[Client]:
    limited = msgspec.structs.replace(settings, grading_user_cap=2, grading_max_pending=3)
    async with AsyncTestClient(create_app(limited), base_url="https://testserver.local") as client:
        yield client


async def served(client: Client, pool: asyncpg.Pool, key: str, user: str) -> dict[str, Any]:
    answer = await client.post(
        "/v1/serve", json={"user_id": user, "track": "backend-engineer"}, headers=bearer(key)
    )
    assert answer.status_code == 200, answer.text
    instance: dict[str, Any] = answer.json()["instance"]
    return instance


async def send(client: Client, key: str, instance: dict[str, Any], idem: str) -> Any:
    code = instance["files"]["pricing.py"] + f"# {idem}\n"
    return await client.post(
        f"/v1/instances/{instance['id']}/submissions",
        json={"files": {"pricing.py": code}},
        headers={**bearer(key), "Idempotency-Key": idem},
    )


async def test_the_user_cap_and_the_pending_limit_refuse_with_retry_after(
    small: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    await stock(pool, PYTHON)
    await grader_row(pool, ["python"], {})
    app = keys["candidate_app"]
    ada, bob = await served(small, pool, app, "ada"), await served(small, pool, app, "bob")
    first, second = await send(small, app, ada, "1"), await send(small, app, ada, "2")
    assert (first.status_code, second.status_code) == (202, 202)
    assert [
        first.json()["submission"]["queue_position"],
        second.json()["submission"]["queue_position"],
    ] == [0, 1]
    third = await send(small, app, ada, "3")
    assert_problem(third, 429, "already has 2 submissions pending or running")
    assert third.headers["retry-after"].isdigit()
    assert (await send(small, app, bob, "4")).status_code == 202
    full = await send(small, app, bob, "5")
    assert_problem(full, 503, "grading queue is full (3 pending submissions, limit 3)")
    assert full.headers["retry-after"].isdigit()
    assert await pool.fetchval("SELECT count(*) FROM submissions") == 3
    read = await small.get(
        f"/v1/submissions/{second.json()['submission']['id']}", headers=bearer(app)
    )
    assert (read.json()["status"], read.json()["queue_position"]) == ("pending", 1)
    assert read.json()["visible_tests"] is None
    assert (await small.get("/v1/submissions/999999", headers=bearer(app))).status_code == 404


async def test_an_instance_graded_its_most_in_the_window_is_refused_until_one_leaves_it(
    settings: Settings, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    """Gradings of one instance, finished or not, count in the window; beyond the most it
    allows, 429 with the seconds until the oldest leaves it, nothing created; a retry of an
    admitted key still answers with its submission; another instance is not held back."""
    limited = msgspec.structs.replace(
        settings, grading_user_cap=10, grading_max_per_instance=3, grading_window_seconds=600
    )
    await stock(pool, PYTHON)
    await grader_row(pool, ["python"], {})
    app = keys["candidate_app"]
    async with AsyncTestClient(create_app(limited), base_url="https://testserver.local") as client:
        ada = await served(client, pool, app, "ada")
        for idem in ("1", "2", "3"):
            assert (await send(client, app, ada, idem)).status_code == 202
        # Graded already: still counted, as each cost its runs.
        await pool.execute(
            "UPDATE submissions SET status = 'error', finished_at = now() WHERE instance_id = $1",
            int(ada["id"]),
        )
        refused = await send(client, app, ada, "4")
        assert_problem(refused, 429, f"instance {ada['id']} was already submitted 3 times")
        assert 595 <= int(refused.headers["retry-after"]) <= 600
        assert (await send(client, app, ada, "3")).status_code == 200
        bob = await served(client, pool, app, "bob")
        assert (await send(client, app, bob, "b1")).status_code == 202
        assert (
            await pool.fetchval(
                "SELECT count(*) FROM submissions WHERE instance_id = $1", int(ada["id"])
            )
            == 3
        )
        # The oldest leaves the window: one more fits.
        await pool.execute(
            """UPDATE submissions SET created_at = created_at - interval '601 seconds'
               WHERE id = (SELECT min(id) FROM submissions WHERE instance_id = $1)""",
            int(ada["id"]),
        )
        assert (await send(client, app, ada, "4")).status_code == 202
        assert_problem(await send(client, app, ada, "5"), 429, "already submitted 3 times")


async def test_a_worker_without_bubblewrap_says_why_it_grades_no_python_and_python_is_refused(
    small: Client,
    pool: asyncpg.Pool,
    keys: dict[Role, str],
    settings: Settings,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's own grading start-up, on a PATH that has every tool of this machine but
    bwrap: its row says why it grades no python, and a python submission is refused with that
    reason, nothing created."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for folder in map(Path, os.environ["PATH"].split(os.pathsep)):
        for tool in sorted(folder.iterdir()) if folder.is_dir() else []:
            if tool.name != "bwrap" and not (tools / tool.name).exists():
                (tools / tool.name).symlink_to(tool)
    monkeypatch.setenv("PATH", str(tools))
    await stock(pool, PYTHON)
    await grader_row(pool, [], {})
    reason = (
        "untrusted code needs bubblewrap (Debian package bubblewrap), but bwrap is not "
        "installed; refusing to run it unconfined"
    )

    async def graders_say() -> Any:
        return await pool.fetchval("SELECT grading_disabled FROM workers WHERE name = 'grader'")

    async with running_grader(
        pool, database_url, settings, worker_name="grader", worker_id="grader:standing:0"
    ):
        disabled = await eventually(graders_say, 30, "the grader's start-up check")
        assert {disabled["python"], disabled["javascript"]} == {reason}
        app = keys["candidate_app"]
        refused = await send(small, app, await served(small, pool, app, "ada"), "1")
    assert_problem(refused, 503, "no live worker can grade python code", reason)
    assert await pool.fetchval("SELECT count(*) FROM submissions") == 0


async def test_code_no_live_worker_can_grade_is_refused_with_the_reason(
    small: Client, pool: asyncpg.Pool, keys: dict[Role, str]
) -> None:
    await stock(pool, PYTHON)
    reason = "untrusted code needs bubblewrap, but bwrap is not installed"
    await grader_row(pool, ["javascript"], {"python": reason})
    app = keys["candidate_app"]
    ada = await served(small, pool, app, "ada")
    refused = await send(small, app, ada, "1")
    assert_problem(refused, 503, "no live worker can grade python code", reason)
    assert refused.headers["retry-after"].isdigit()
    assert await pool.fetchval("SELECT count(*) FROM submissions") == 0
