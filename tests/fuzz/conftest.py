"""The fuzz tier's target: a real `warmpool serve` process on a database of its own that holds
missions awaiting review and approved, jobs and instances, shared by the three roles' runs; and
the schema the fuzzer reads from it with one role's key.

WARMPOOL_FUZZ_EXAMPLES sets the generated cases per operation, phase and role (a few by default:
the short form the test command runs; bench/fuzz.py runs the long form); the coverage phase's
boundary cases come on top. WARMPOOL_FUZZ_SEED picks the cases; the default is fixed, so that a
failure in CI fails the same way on a laptop.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis

from core import domains
from server.auth import ROLES, Role
from server.database import create_pool
from tests.support import fleet, postgres
from tests.support.http import bearer
from tests.support.missions import serve_identity_as_often_as_its_variant
from tests.support.proven_missions import store_mission
from tests.support.server import ROOT, create_keys, running_server

EXAMPLES = int(os.environ.get("WARMPOOL_FUZZ_EXAMPLES", "5"))
SEED = int(os.environ.get("WARMPOOL_FUZZ_SEED", "4242"))
DOMAIN_MAP = domains.load(ROOT / "domain_map.yaml")
USERS = ["fuzz-user-1", "fuzz-user-2"]
# An answer slower than this is a hang, which the fuzzer reports instead of waiting for.
REQUEST_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Target:
    url: str
    keys: dict[Role, str]
    # The values mixed into the generated ones (see BINDINGS): real ids, users and tracks, so
    # that requests reach rows and get past validation, and awkward values.
    dictionaries: dict[str, list[str]]
    log_dir: Path


@pytest.fixture(scope="module")
async def target(
    postgres_server: str, template: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Target]:
    """One server for the three roles' runs, each going on from where the one before left the
    rows: starting and seeding a server costs as much as a role's run."""
    name, url = await postgres.create_database(postgres_server, template)
    try:
        keys = await create_keys(url)
        await fleet.standing_worker(url)
        missions = await store_missions(url)
        log_dir = tmp_path_factory.mktemp("fuzz")
        with running_server(url, log_dir) as server, httpx.Client(base_url=server) as client:
            yield Target(server, keys, seed_through_the_api(client, keys, missions), log_dir)
    finally:
        await postgres.drop_database(postgres_server, name)


async def store_missions(database_url: str) -> list[str]:
    """Two missions per domain, awaiting review, each served as often as its bug allows from
    its one rendering, so that generated serves keep finding stock."""
    db = await create_pool(database_url, max_size=1)
    try:
        missions = [
            await store_mission(db, domain)
            for domain in DOMAIN_MAP.domains.values()
            for _ in range(2)
        ]
        for mission in missions:
            await serve_identity_as_often_as_its_variant(db, mission)
        return [str(mission) for mission in missions]
    finally:
        await db.close()


def seed_through_the_api(
    client: httpx.Client, keys: dict[Role, str], missions: list[str]
) -> dict[str, list[str]]:
    """Approve one mission per domain, serve and enqueue for the users; the dictionaries."""
    reviewer, candidate_app = bearer(keys["qa_reviewer"]), bearer(keys["candidate_app"])
    for mission in missions[::2]:
        approved = client.post(f"/v1/qa/missions/{mission}/approve", json={}, headers=reviewer)
        approved.raise_for_status()
    instances, jobs = [], []
    for user in USERS:
        body = {"user_id": user, "track": "backend-engineer"}
        served = client.post("/v1/serve", json=body, headers=candidate_app)
        instances.append(served.raise_for_status().json()["instance"]["id"])
        enqueued = client.post(
            "/v1/jobs", json=body, headers=candidate_app | {"Idempotency-Key": f"seed-{user}"}
        )
        jobs.append(enqueued.raise_for_status().json()["job"]["id"])
    return {
        "missions": missions + AWKWARD_IDS,
        "jobs": jobs + AWKWARD_IDS,
        "instances": instances + AWKWARD_IDS,
        "users": USERS + AWKWARD_TEXT,
        "texts": ["Looks right.", "The bug is too easy to spot.", *AWKWARD_TEXT],
        "idempotency_keys": [f"seed-{USERS[0]}", "fuzz-key", *AWKWARD_TEXT],
        "tracks": sorted(DOMAIN_MAP.tracks),
        "domains": sorted(DOMAIN_MAP.domains),
        "qa_statuses": ["awaiting_review", "approved", "rejected"],
    }


# Values that have broken servers before, beside the real ones: ids that are no row or no
# number, and text that Postgres cannot store, that is too long, or that looks like SQL.
AWKWARD_IDS = ["0", "-1", "9" * 19, "../.."]
AWKWARD_TEXT = [
    "",
    " ",
    "\x00",
    "fuzz\x00user",
    "x" * 201,
    "é🙂\u202e",
    "'; DROP TABLE missions; --",
]

# Where each dictionary's values go (a path, query or header parameter, or a body field), and
# how often: the rest are generated. Most requests should get past the track's check to the
# serve and the queue; a reused Idempotency-Key with another body is a 409, so keys come from
# the dictionary less often.
BINDINGS = {
    "path.mission_id": ("missions", 0.5),
    "path.job_id": ("jobs", 0.5),
    "path.instance_id": ("instances", 0.5),
    "path.user_id": ("users", 0.5),
    "body.user_id": ("users", 0.5),
    "body.track": ("tracks", 0.8),
    "body.note": ("texts", 0.5),
    "body.reason": ("texts", 0.5),
    "query.domain": ("domains", 0.5),
    "query.status": ("qa_statuses", 0.5),
    "header.Idempotency-Key": ("idempotency_keys", 0.2),
}


@pytest.fixture(params=ROLES)
def role(request: pytest.FixtureRequest) -> Role:
    value: Role = request.param
    return value


@pytest.fixture
def api_schema(target: Target, role: Role) -> schemathesis.BaseSchema:
    # What the command line reads from the repository's schemathesis.toml, and this run's own.
    config = schemathesis.Config.from_dict(
        tomllib.loads((ROOT / "schemathesis.toml").read_text())
        | {
            "headers": bearer(target.keys[role]),
            "dictionaries": {
                name: {"values": values} for name, values in target.dictionaries.items()
            },
            "parameters": {
                key: {"dictionary": name, "probability": probability}
                for key, (name, probability) in BINDINGS.items()
            },
            "seed": SEED,
            # One run's cases come from the seed alone: nothing kept from earlier runs.
            "cache": {"enabled": False},
            "generation": {"max-examples": EXAMPLES, "database": "none"},
            "request-timeout": REQUEST_TIMEOUT_SECONDS,
        }
    )
    # As `schemathesis run --checks all` sets them.
    config.projects.override.checks.update(included_check_names=["all"])
    return schemathesis.openapi.from_url(f"{target.url}/schema/openapi.json", config=config)
