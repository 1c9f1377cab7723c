"""The logs of a real `warmpool serve` (API and worker) whose output is not a terminal: one
JSON object per line on stderr, job events with their job id and attempt, and no secret of the
settings anywhere in what the process wrote."""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest

from tests.support.openai_stub import closed_port_url
from tests.support.polling import eventually
from tests.support.server import create_keys, environment, free_port, spawn, wait_ready

pytestmark = pytest.mark.slow
JOB_IN_MESSAGE = re.compile(r"\bjob (\d+)")


def with_password(url: str) -> tuple[str, str]:
    """`url` with a password (its own, or a made-up one the trusting test server ignores)."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    password = f"db-password-{uuid.uuid4().hex}"
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user or 'postgres'}:{password}@{host}")), password


async def test_job_events_are_json_lines_with_their_fields_and_no_secret_is_ever_written(
    database_url: str, pool: asyncpg.Pool, tmp_path: Path
) -> None:
    keys = await create_keys(database_url)
    url_with_password, password = with_password(database_url)
    secrets = {
        "OPENAI_API_KEY": f"sk-test-{uuid.uuid4().hex}",
        "WARMPOOL_SECRET_KEY": f"session-secret-{uuid.uuid4().hex}",
    }
    env = environment(
        url_with_password,
        {
            **secrets,
            # The model API refuses connections: each call fails unbilled, then is retried.
            "OPENAI_BASE_URL": closed_port_url(),
            "WARMPOOL_TICK_SECONDS": "0.5",
        },
    )
    port = free_port()
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    process = spawn(
        [sys.executable, "-m", "server", "serve", "--port", str(port)], env, stderr, stdout=stdout
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, process)
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            answer = await client.post(
                "/v1/jobs",
                json={"user_id": "log-user", "track": "marketing-manager"},
                headers={
                    "Authorization": f"Bearer {keys['candidate_app']}",
                    "Idempotency-Key": "log-test",
                },
            )
        assert answer.status_code == 202, answer.text
        job_id = int(answer.json()["job"]["id"])

        async def tried_the_model() -> bool:
            return bool(await pool.fetchval("SELECT count(*) FROM llm_calls"))

        await eventually(tried_the_model, 20, "a model call to be tried")
    finally:
        process.stop()

    written = stdout.read_text() + stderr.read_text()
    for name, value in [*secrets.items(), ("the database password", password)]:
        assert value not in written, f"{name} appears in the output"

    events = [json.loads(line) for line in stderr.read_text().splitlines() if line.strip()]
    assert all(isinstance(event, dict) for event in events)
    assert all({"time", "level", "logger", "message"} <= event.keys() for event in events)
    about_jobs = [event for event in events if JOB_IN_MESSAGE.search(event["message"])]
    for event in about_jobs:
        mentioned = JOB_IN_MESSAGE.search(event["message"])
        assert mentioned is not None
        assert event["job_id"] == int(mentioned[1]), event
        assert isinstance(event["attempt"], int), event
    [claimed] = [
        event
        for event in about_jobs
        if event["message"].startswith("claimed job") and event["job_id"] == job_id
    ]
    assert claimed["attempt"] == 1
    assert claimed["user_id"] == "log-user"
    assert claimed["worker_id"].endswith(f":{process.popen.pid}")
    assert any("[redacted]" in event["message"] for event in events), "the database URL, shown"
