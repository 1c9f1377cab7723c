"""Grading candidates' fixes over HTTP against a real `warmpool serve` (API and worker in one
process): verdicts, the hidden tests counted and never shown, the paths a submission may name,
and hostile code that ends within the time limit leaving nothing behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from qa import processes
from server import places
from server.auth import Role
from tests.support.grading import (
    COPY,
    HARD_CODED,
    bearer,
    domain_map,
    graded,
    graders_ready,
    serve,
    slot_uids,
    stock,
    submit,
    verdict,
)
from tests.support.polling import eventually
from tests.support.proven_missions import HIDDEN, TESTS
from tests.support.proving import ensure_toolchain
from tests.support.server import ROOT, create_keys, running_server

pytestmark = pytest.mark.slow
TIME_LIMIT = 5


@dataclass
class Grading:
    client: httpx.AsyncClient
    keys: dict[Role, str]
    log_dir: Path

    @property
    def app(self) -> str:
        return self.keys["candidate_app"]


@pytest.fixture
async def grading(database_url: str, pool: asyncpg.Pool, tmp_path: Path) -> AsyncIterator[Grading]:
    ensure_toolchain()
    keys = await create_keys(database_url)
    await stock(pool)
    overrides = {
        "WARMPOOL_DOMAIN_MAP": str(domain_map(tmp_path)),
        "WARMPOOL_GRADING_TIME_LIMIT_SECONDS": str(TIME_LIMIT),
        "WARMPOOL_TICK_SECONDS": "1",
    }
    with running_server(
        database_url, tmp_path, worker=True, overrides=overrides, ready_within=120
    ) as url:
        await graders_ready(pool)
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            yield Grading(client, keys, tmp_path)


async def test_a_fix_passes_only_with_every_visible_and_hidden_test(grading: Grading) -> None:
    client, app = grading.client, grading.app
    instance = await serve(client, app, "ada")
    served = {path: code for path, code in instance["files"].items() if path not in TESTS}

    unchanged = await graded(client, app, instance["id"], {"pricing.py": served["pricing.py"]}, "a")
    assert unchanged["status"] == "failed"
    assert unchanged["visible_tests"]["failed"] > 0

    qa = await client.get(
        f"/v1/qa/instances/{instance['id']}", headers=bearer(grading.keys["qa_reviewer"])
    )
    assert qa.status_code == 200, qa.text
    assert qa.json()["instance"]["id"] == instance["id"]
    gold = qa.json()["gold_files"]
    fixed = await graded(client, app, instance["id"], gold, "b")
    assert (fixed["status"], fixed["error"]) == ("passed", None)
    assert fixed["visible_tests"] == {"passed": 2, "failed": 0, "total": 2}
    assert fixed["hidden_tests"] == {"passed": 2, "failed": 0, "total": 2}
    assert [test["outcome"] for test in fixed["tests"]] == ["passed", "passed"]

    hard_coded = await graded(client, app, instance["id"], {"pricing.py": HARD_CODED}, "c")
    assert hard_coded["status"] == "failed"
    assert hard_coded["visible_tests"] == {"passed": 2, "failed": 0, "total": 2}
    assert hard_coded["hidden_tests"] == {"passed": 0, "failed": 2, "total": 2}

    listed = await client.get(f"/v1/instances/{instance['id']}/submissions", headers=bearer(app))
    assert [s["id"] for s in listed.json()["submissions"]] == [
        hard_coded["id"],
        fixed["id"],
        unchanged["id"],
    ]
    for shown in (listed.text, qa.text):
        for path, code in HIDDEN.items():
            assert path not in shown
            assert code not in shown


async def test_code_that_raises_every_file_it_reads_shows_nothing_hidden(
    grading: Grading,
) -> None:
    """The visible run holds no hidden test; of the hidden run only counts come back."""
    client, app = grading.client, grading.app
    instance = await serve(client, app, "eve")
    thief = (
        "import os\n"
        "stolen = {}\n"
        "for folder, _, names in os.walk('.'):\n"
        "    for name in names:\n"
        "        try:\n"
        "            stolen[name] = open(os.path.join(folder, name)).read()\n"
        "        except OSError:\n"
        "            pass\n"
        "print(stolen)\n"
        "def total(prices, discount):\n"
        "    raise AssertionError(repr(stolen))\n"
    )
    stolen = await graded(client, app, instance["id"], {"pricing.py": thief}, "thief")
    assert stolen["status"] == "failed"
    assert stolen["hidden_tests"] == {"passed": 0, "failed": 2, "total": 2}
    text = (await client.get(f"/v1/submissions/{stolen['id']}", headers=bearer(app))).text
    assert "test_no_discount" in text  # its own tests' messages do come back
    assert "quarter_off" not in text
    assert "test_pricing_more" not in text


async def test_submissions_that_name_other_files_are_refused_by_name(
    grading: Grading, pool: asyncpg.Pool
) -> None:
    client, app = grading.client, grading.app
    instance = await serve(client, app, "bob")
    code = instance["files"]["pricing.py"]
    for files, named in [
        ({"test_pricing.py": "def test_x(): pass\n"}, "'test_pricing.py' is a test file"),
        ({"conftest.py": "import os\n"}, "'conftest.py' is a test file"),
        ({"evil.py": "x = 1\n"}, "'evil.py' is not a code file of this instance"),
        ({}, "files is empty"),
        ({"pricing.py": "x" * (600 * 1024)}, "at most 524288 (512 KB)"),
    ]:
        answer = await submit(client, app, instance["id"], files, f"bad-{len(files)}-{named}")
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert named in answer.json()["detail"]
    no_key = await client.post(
        f"/v1/instances/{instance['id']}/submissions",
        json={"files": {"pricing.py": code}},
        headers=bearer(app),
    )
    assert no_key.status_code == 400
    assert (await submit(client, app, "999999", {"pricing.py": code}, "k")).status_code == 404

    first = await submit(client, app, instance["id"], {"pricing.py": code}, "same")
    again = await submit(client, app, instance["id"], {"pricing.py": code}, "same")
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json()["submission"]["id"] == again.json()["submission"]["id"]
    other = await submit(client, app, instance["id"], {"pricing.py": code + "#\n"}, "same")
    assert other.status_code == 409
    await verdict(client, app, first.json()["submission"]["id"])

    await stock(pool, COPY)
    copy = await serve(client, app, "bob", track="marketing-manager")
    without_code = await submit(client, app, copy["id"], {"x.md": "y"}, "copy")
    assert without_code.status_code == 422
    assert "without code" in without_code.json()["detail"]
    assert await pool.fetchval("SELECT count(*) FROM submissions") == 1


HOSTILE = {
    "loop": "def total(prices, discount):\n    while True:\n        pass\n",
    "fork-bomb": (
        "import os\n"
        "def total(prices, discount):\n"
        "    while True:\n"
        "        try:\n"
        "            os.fork()\n"
        "        except OSError:\n"
        "            pass\n"
    ),
    "gigabyte": (
        "def total(prices, discount):\n"
        "    hoard = bytearray(1024 * 1024 * 1024)\n"
        "    return len(hoard)\n"
    ),
    "network": (
        "import socket\n"
        "def total(prices, discount):\n"
        "    socket.create_connection(('127.0.0.1', 5432), timeout=3).close()\n"
        "    return round(sum(prices) * (1 - discount), 2)\n"
    ),
}


async def test_hostile_code_ends_within_the_time_limit_and_leaves_nothing(
    grading: Grading,
) -> None:
    client, app = grading.client, grading.app
    instances = {name: await serve(client, app, f"hostile-{name}") for name in HOSTILE}
    verdicts = await asyncio.gather(
        *(
            graded(client, app, instances[name]["id"], {"pricing.py": code}, name)
            for name, code in HOSTILE.items()
        )
    )
    by_name = dict(zip(HOSTILE, verdicts, strict=True))
    for name, found in by_name.items():
        assert found["status"] in ("failed", "error"), (name, found)
        assert found["error"], (name, found)
        # Both runs together are stopped at the limit, but for the moment the kill takes.
        assert found["duration_s"] <= TIME_LIMIT + 1, (name, found)
    assert "timed out" in by_name["loop"]["error"]
    assert "timed out" in by_name["fork-bomb"]["error"]
    # A MemoryError in each test, or (on a loaded machine) the time limit first.
    gigabyte = by_name["gigabyte"]
    assert gigabyte["visible_tests"]["failed"] == 2 or "timed out" in gigabyte["error"], gigabyte
    network = by_name["network"]["tests"]
    assert all(test["outcome"] != "passed" for test in network)
    assert any("refused" in test["message"] or "unreachable" in test["message"] for test in network)

    [log] = grading.log_dir.glob("serve-*.log")
    uids = slot_uids(log)
    assert uids, "grading runs under sandbox uids of its own"

    async def clean() -> bool:
        left = [pid for uid in uids for pid in processes.living(uid)]
        folders = list(places.of(ROOT / ".warmpool").gradings.glob("prover-*/run-*"))
        return not left and not folders

    await eventually(clean, 10, "no process of a grading uid and no run folder left")
