"""Grading benchmark: the time from a submission to its verdict over HTTP, and gradings per
second per proof slot at saturation, beside a bare pytest run of the same files (the floor).

    python bench/grading.py [--idle 15] [--saturation 40] [--database-url postgresql://...]

Against one `warmpool serve` (API and worker) on a scratch database stocked with one offline
catalog mission per language: `--idle` submissions of the gold, one at a time, per language,
timed from the POST to the verdict as a client polling every 20 ms sees it (median and p99;
goals on a 2-core machine: python 1.5 s, javascript 3 s, sql 1.5 s); then `--saturation`
python submissions at once, graded on the worker's grading slots, as gradings per second per
slot; then the same visible and hidden test runs of pytest, straight on the host, one at a
time (no sandbox, no queue, no HTTP), as the floor, and the ratio.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time

import asyncpg
import httpx

from bench.scratch import database_parser, fresh_database
from core.domains import Domain, Language
from generation.offline import catalog
from qa.missions import MissionProof, store
from qa.toolchain import locate
from server import migrate
from server.auth import create_key
from server.database import create_pool
from tests.support.missions import serve_identity_as_often_as_its_variant
from tests.support.server import running_server

GOALS_S = {"python": 1.5, "javascript": 3.0, "sql": 1.5}
DOMAINS: dict[Language, str] = {
    "python": "python-backend",
    "javascript": "javascript-frontend",
    "sql": "sql-data",
}
SLOTS = 2
DOMAIN_MAP = (
    "tracks:\n"
    + "".join(f"  {language}: [{domain}]\n" for language, domain in DOMAINS.items())
    + "domains:\n"
    + "".join(
        # One bug serves every submission of the benchmark.
        f"  {domain}:\n    kind: technical\n    language: {language}\n    target: 0\n"
        "    bug_share: 1000\n"
        for language, domain in DOMAINS.items()
    )
)
MISSIONS = {
    language: next(m for m in catalog.load() if m.language == language) for language in DOMAINS
}


async def stocked(server: str) -> tuple[str, str]:
    database_url = await fresh_database(server, "bench_grading")
    pool = await create_pool(database_url)
    try:
        async with pool.acquire() as connection:
            await migrate.apply(connection)
            key = await create_key(connection, "candidate_app", "bench")
        for language, mission in MISSIONS.items():
            domain = Domain(
                name=DOMAINS[language],
                kind="technical",
                language=language,
                target=0,
                retire_after=1000,
                review="proof",
                bug_share=1000,
            )
            mission_id = await store(
                pool,
                domain=domain,
                title=mission.title,
                brief=mission.brief,
                gold_files=mission.gold_files,
                test_files=mission.test_files,
                hidden_test_files=mission.hidden_test_files,
                sabotaged_files=mission.gold_files,
                bug_summary="none",
                grader_hint="",
                provider="offline",
                prompt_version=None,
                proof=MissionProof(gold=None, sabotage_tries=[], verdict="benchmark"),
                job_id=None,
                requested_by=None,
                max_serves=1000,
                proven=True,
            )
            assert mission_id is not None
            # Served as often as the benchmark asks, from the one rendering it has.
            await serve_identity_as_often_as_its_variant(pool, mission_id)
    finally:
        await pool.close()
    return database_url, key


async def graded(client: httpx.AsyncClient, key: str, language: Language, user: str) -> float:
    """Seconds from the POST of the gold to its verdict (which must be passed)."""
    headers = {"Authorization": f"Bearer {key}"}
    served = await client.post(
        "/v1/serve", json={"user_id": user, "track": language}, headers=headers
    )
    instance = served.json()["instance"]
    files = {path: MISSIONS[language].gold_files[path] for path in MISSIONS[language].gold_files}
    started = time.perf_counter()
    answer = await client.post(
        f"/v1/instances/{instance['id']}/submissions",
        json={"files": files},
        headers={**headers, "Idempotency-Key": user},
    )
    submission = answer.json()["submission"]["id"]
    while True:
        verdict = (await client.get(f"/v1/submissions/{submission}", headers=headers)).json()
        if verdict["status"] not in ("pending", "running"):
            assert verdict["status"] == "passed", verdict
            return time.perf_counter() - started
        await asyncio.sleep(0.02)


def bare_pytest_seconds(runs: int) -> float:
    """Median seconds of one grading's two pytest runs straight on the host."""
    python = locate(ROOT / ".warmpool" / "toolchain").python
    mission = MISSIONS["python"]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        for tests in (mission.test_files, mission.hidden_test_files):
            with tempfile.TemporaryDirectory() as folder:
                for path, content in {
                    **mission.gold_files,
                    **tests,
                    "pytest.ini": "[pytest]\n",
                }.items():
                    (Path(folder) / path).write_text(content)
                subprocess.run(
                    [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                    cwd=folder,
                    check=True,
                    capture_output=True,
                )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def main(arguments: argparse.Namespace) -> None:
    database_url, key = await stocked(arguments.database_url)
    folder = Path(tempfile.mkdtemp())
    (folder / "domain_map.yaml").write_text(DOMAIN_MAP)
    overrides = {
        "WARMPOOL_DOMAIN_MAP": str(folder / "domain_map.yaml"),
        "WARMPOOL_PROOF_SLOTS": str(SLOTS),
        "WARMPOOL_GRADING_MAX_PENDING": "10000",
        "WARMPOOL_REQUEST_TIMEOUT_SECONDS": "60",
    }
    with running_server(
        database_url, folder, worker=True, overrides=overrides, ready_within=180
    ) as url:
        pool = await asyncpg.connect(database_url)
        while not await pool.fetchval(
            "SELECT count(*) FROM workers WHERE grading_languages <> '{}'"
        ):
            await asyncio.sleep(0.2)
        await pool.close()
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            print(f"{arguments.idle} gradings of the gold per language, one at a time:")
            for language in DOMAINS:
                times = sorted(
                    [
                        await graded(client, key, language, f"{language}-{n}")
                        for n in range(arguments.idle)
                    ]
                )
                p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
                median = statistics.median(times)
                met = "met" if median <= GOALS_S[language] else "MISSED"
                print(
                    f"  {language:<11} median {median:.2f} s, p99 {p99:.2f} s "
                    f"(goal {GOALS_S[language]} s: {met})"
                )
            started = time.perf_counter()
            await asyncio.gather(
                *(graded(client, key, "python", f"load-{n}") for n in range(arguments.saturation))
            )
            rate = arguments.saturation / (time.perf_counter() - started) / SLOTS
    floor = 1 / bare_pytest_seconds(5)
    print(
        f"saturation: {rate:.2f} gradings/s per slot ({arguments.saturation} at once, {SLOTS} slots)"
    )
    print(
        f"floor: {floor:.2f} gradings/s (bare pytest, visible + hidden, one at a time): "
        f"ratio {rate / floor:.2f}"
    )


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--idle", type=int, default=15)
    parser.add_argument("--saturation", type=int, default=40)
    asyncio.run(main(parser.parse_args()))
