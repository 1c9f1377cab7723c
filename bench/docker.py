"""The Docker deployment built and run on this machine, with podman: scripts/docker-check sets
up the engine, then runs this.

    python bench/docker.py [--fresh]

Builds the images (a Debian bookworm base made with mmdebstrap stands in for the registry's
python and postgres images, which this machine cannot pull), starts docker/compose.yaml on
the host's network (docker/compose.host-network.yaml: PostgreSQL, the pgTAP proof server,
migrate, two API processes, two workers), creates keys with the CLI inside an API container,
waits for a mission of the track in review, approves it as a reviewer, serves it through one
API process and reads the instance back through the other. Then it enqueues work and stops
the API processes and workers with SIGTERM while generations are under way, and checks that
every process exited 0 within its grace and that no job is left generating, no model call
open, no worker slot held and no connection open. Prints the build time, the image sizes,
the serve, the stop and how the generations under way ended; removes its containers, pod
and volume whatever happens. --fresh removes the images first, so the build is a cold one.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import json
import os
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

import asyncpg
import httpx

from core.domains import load
from tests.support.polling import until

PROJECT = "warmpool-check"
BASE_IMAGE = "localhost/warmpool-base:bookworm"
POSTGRES_IMAGE = "localhost/warmpool-postgres-base:15"
IMAGES = ("localhost/warmpool:local", "localhost/warmpool-proof-postgres:15", POSTGRES_IMAGE)
# Beside the PostgreSQL on 5432 and the tests' servers: every process is on the host's network.
PORTS = {
    "WARMPOOL_POSTGRES_PORT": 55432,
    "WARMPOOL_PROOF_POSTGRES_PORT": 55433,
    "WARMPOOL_API_PORT": 18001,
    "WARMPOOL_API_2_PORT": 18002,
}
TRACK = "backend-engineer"
# HTTPS to the registries goes through a proxy whose certificate only the host's bundle holds.
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BUILD_ARGS = f"--network host --volume {CA_BUNDLE}:{CA_BUNDLE}:ro"
COMPOSE = ROOT / ".warmpool" / "docker-check" / "venv" / "bin" / "podman-compose"
STOPPED = ("api", "api-2", "worker", "worker-2")
GRACE = {"api": 20.0, "api-2": 20.0, "worker": 120.0, "worker-2": 120.0}


def run(*command: str, env: dict[str, str] | None = None) -> str:
    """`command`'s output; its output and a clear error if it fails."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"docker-check: `{' '.join(command)}` exited {done.returncode}")
    return done.stdout


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name], check=False).returncode == 0


def build_base() -> float | None:
    """The Debian base, made with mmdebstrap and imported, unless it exists: its seconds."""
    if image_exists(BASE_IMAGE):
        return None
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        tarball = f"{folder}/base.tar"
        run(
            "mmdebstrap",
            "--variant=minbase",
            "--include=python3,python3-venv,python-is-python3,ca-certificates",
            "bookworm",
            tarball,
            "http://deb.debian.org/debian",
        )
        run("podman", "import", "--change", 'CMD ["/bin/bash"]', tarball, BASE_IMAGE)
    return time.monotonic() - start


def build_postgres() -> float:
    """The stand-in for the registry's postgres image, on the base."""
    start = time.monotonic()
    run(
        "podman", "build", *BUILD_ARGS.split(), "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
        "-f", str(ROOT / "docker/local/postgres.Dockerfile"), "-t", POSTGRES_IMAGE,
        str(ROOT / "docker/local"),
    )  # fmt: skip
    return time.monotonic() - start


def environment() -> dict[str, str]:
    return {
        **os.environ,
        **{name: str(port) for name, port in PORTS.items()},
        "POSTGRES_PASSWORD": secrets.token_hex(16),
        "PROOF_POSTGRES_PASSWORD": secrets.token_hex(16),
        "WARMPOOL_SECRET_KEY": secrets.token_hex(24),
        "WARMPOOL_PYTHON_IMAGE": BASE_IMAGE,
        "WARMPOOL_POSTGRES_IMAGE": POSTGRES_IMAGE,
        # Each offline call takes this long, so that generations are under way at the stop.
        "WARMPOOL_OFFLINE_DELAY_SECONDS": "1",
        # Two generations at once per worker: proofs share the machine's two cores.
        "WARMPOOL_WORKER_CONCURRENCY": "2",
    }


class Compose:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *arguments: str) -> str:
        return run(
            str(COMPOSE), "--podman-build-args", BUILD_ARGS, "-p", PROJECT,
            "-f", str(ROOT / "docker/compose.yaml"),
            "-f", str(ROOT / "docker/compose.host-network.yaml"),
            *arguments, env=self.env,
        )  # fmt: skip


def containers() -> dict[str, dict[str, Any]]:
    """The project's containers by service name, as `podman inspect` shows them."""
    names = run(
        "podman", "ps", "-a", "--format", "{{.Names}}",
        "--filter", f"label=io.podman.compose.project={PROJECT}",
    ).split()  # fmt: skip
    if not names:
        return {}
    found = json.loads(run("podman", "inspect", *names))
    return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in found}


def healthy(service: str) -> bool:
    """What the compose file's health check says (podman 4.3 runs it only when asked)."""
    name = containers()[service]["Name"]
    check = subprocess.run(["podman", "healthcheck", "run", name], capture_output=True, check=False)
    return check.returncode == 0


def start(compose: Compose) -> tuple[float, float]:
    """Up and ready: both API processes answer /readyz. When the warmpool processes started
    (time.monotonic()), and the seconds until they were ready. The services start in the
    order compose.yaml's depends_on gives, one step at a time, because podman-compose skips
    `service_healthy` on podman before 4.6 and podman 4.3 would start a finished migrate again
    with each service that requires it."""
    begin = time.monotonic()
    compose("up", "-d", "postgres", "proof-postgres")
    for service in ("postgres", "proof-postgres"):
        until(partial(healthy, service), 120, f"{service} healthy", every=1)
    compose("up", "-d", "--no-deps", "migrate")
    migrate = until(lambda: exited(containers()["migrate"]), 120, "migrate done", every=1)
    if migrate["State"]["ExitCode"] != 0:
        print(run("podman", "logs", migrate["Name"]))
        raise SystemExit("docker-check: `warmpool migrate` failed")
    compose("up", "-d", "--no-deps", *STOPPED)
    for port in (PORTS["WARMPOOL_API_PORT"], PORTS["WARMPOOL_API_2_PORT"]):
        until(partial(ready, port), 120, f"the API on {port} ready", every=0.5)
    return begin, time.monotonic() - begin


def exited(container: dict[str, Any]) -> dict[str, Any] | None:
    return container if container["State"]["Status"] == "exited" else None


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def create_key(role: str) -> str:
    """A key made by the CLI inside the first API process's container."""
    name = containers()["api"]["Name"]
    return run("podman", "exec", name, "warmpool", "keys", "create", "--role", role).split()[-1]


def api(port: int, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )


def serve(
    admin: httpx.Client,
    reviewer: httpx.Client,
    first: httpx.Client,
    second: httpx.Client,
    begin: float,
) -> dict[str, Any]:
    """Waits for a mission of the track in review, approves it as a reviewer, serves it
    through one API process and reads the instance back through the other: the figures."""
    workers = until(lambda: live_workers(admin), 180, "two live workers", every=1)
    track = load(ROOT / "domain_map.yaml").tracks[TRACK]

    def in_review() -> str | None:
        found = reviewer.get("/v1/qa/missions", params={"status": "awaiting_review"})
        missions = found.raise_for_status().json()["missions"]
        return next((m["id"] for m in missions if m["domain"] in track), None)

    mission = until(in_review, 900, f"a mission of {TRACK} in review", every=1)
    made = time.monotonic() - begin
    reviewer.post(f"/v1/qa/missions/{mission}/approve", json={}).raise_for_status()
    answer = first.post("/v1/serve", json={"user_id": "docker-check", "track": TRACK})
    if answer.status_code != 200:
        raise SystemExit(f"docker-check: serve answered {answer.status_code}: {answer.text}")
    instance = answer.json()["instance"]
    again = second.get(f"/v1/instances/{instance['id']}").raise_for_status().json()
    if again != instance:
        raise SystemExit("docker-check: the other API process reads another instance")
    if instance["mission_id"] != mission or not instance["files"] or "gold_files" in instance:
        raise SystemExit(f"docker-check: not the approved mission's instance: {instance}")
    return {
        "workers": workers,
        "made_s": made,
        "serve_ms": answer.elapsed.total_seconds() * 1000,
        "instance": instance,
    }


def live_workers(admin: httpx.Client) -> list[dict[str, Any]] | None:
    found: list[dict[str, Any]] = admin.get("/v1/workers").raise_for_status().json()["workers"]
    return found if len(found) == 2 else None


def stop(candidate: httpx.Client, database_url: str) -> dict[str, Any]:
    """Enqueues work, waits until generations are under way, then stops the API processes and
    workers with SIGTERM (podman stop; SIGKILL only past 150 s): what was under way, and
    each process's exit code and seconds to exit."""
    for user in range(12):
        candidate.post(
            "/v1/jobs",
            json={"user_id": f"docker-check-{user}", "track": TRACK},
            headers={"Idempotency-Key": f"docker-check-{user}"},
        ).raise_for_status()

    def generating() -> list[int] | None:
        rows = query(database_url, "SELECT id FROM generation_jobs WHERE status = 'generating'")
        return [row["id"] for row in rows] or None

    under_way = until(generating, 60, "generations under way", every=0.1)
    names = {service: containers()[service]["Name"] for service in STOPPED}
    begin = datetime.now().astimezone()
    run("podman", "stop", "--time", "150", *names.values())
    found = containers()
    exits = {
        service: {
            "exit_code": found[service]["State"]["ExitCode"],
            "seconds": (finished(found[service]) - begin).total_seconds(),
        }
        for service in STOPPED
    }
    return {"under_way": under_way, "exits": exits}


def finished(container: dict[str, Any]) -> datetime:
    # podman writes nanoseconds; fromisoformat reads microseconds.
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", container["State"]["FinishedAt"]))


def query(database_url: str, sql: str, *arguments: object) -> list[asyncpg.Record]:
    async def fetch() -> list[asyncpg.Record]:
        connection = await asyncpg.connect(database_url)
        try:
            return list(await connection.fetch(sql, *arguments))
        finally:
            await connection.close()

    return asyncio.run(fetch())


def lost(database_url: str, under_way: list[int]) -> tuple[list[str], dict[str, int]]:
    """What the stop left undone or failed (none of it may be), and how the jobs under way at
    the stop ended, by status."""
    [counts] = query(
        database_url,
        """
        SELECT (SELECT count(*) FROM generation_jobs WHERE status = 'generating') AS generating,
               (SELECT count(*) FROM llm_calls WHERE outcome = 'started') AS open_calls,
               (SELECT coalesce(sum(running), 0) FROM workers) AS slots_held,
               (SELECT count(*) FROM pg_stat_activity
                 WHERE datname = 'warmpool' AND pid <> pg_backend_pid()) AS connections
        """,
    )
    faults = [f"{value} {name.replace('_', ' ')}" for name, value in counts.items() if value]
    ended = query(
        database_url,
        """
        SELECT status || coalesce(' (' || error || ')', '') AS outcome, count(*)
          FROM generation_jobs WHERE id = ANY($1::bigint[]) GROUP BY 1
        """,
        under_way,
    )
    # A job under way at a stop ends or goes back to the queue; the stop fails none.
    faults += [
        f"{row['count']} {row['outcome']}" for row in ended if row["outcome"].startswith("failed")
    ]
    return faults, {row["outcome"]: row["count"] for row in ended}


def size(image: str) -> int:
    return int(run("podman", "image", "inspect", "--format", "{{.Size}}", image).strip())


@contextmanager
def stack(compose: Compose) -> Iterator[None]:
    """Removes the project's containers, pod and volume, whatever happens."""
    try:
        yield
    finally:
        compose("down", "--volumes", "--timeout", "150")
        left = containers()
        if left:
            raise SystemExit(f"docker-check: containers left: {sorted(left)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fresh", action="store_true", help="remove the images first")
    arguments = parser.parse_args()
    if arguments.fresh:
        for image in (*IMAGES, BASE_IMAGE):
            if image_exists(image):
                run("podman", "rmi", "--force", image)
    compose = Compose(environment())
    compose("down", "--volumes")  # what an interrupted run left

    base = build_base()
    begin = time.monotonic()
    build_postgres()
    compose("build", "migrate", "proof-postgres")  # migrate's image is every warmpool process's
    built = time.monotonic() - begin
    env = compose.env
    database_url = (
        f"postgresql://warmpool:{env['POSTGRES_PASSWORD']}@127.0.0.1:"
        f"{PORTS['WARMPOOL_POSTGRES_PORT']}/warmpool"
    )
    with stack(compose):
        begin, started = start(compose)
        admin_key = create_key("admin")
        candidate_key = create_key("candidate_app")
        reviewer_key = create_key("qa_reviewer")
        first = api(PORTS["WARMPOOL_API_PORT"], candidate_key)
        second = api(PORTS["WARMPOOL_API_2_PORT"], candidate_key)
        admin = api(PORTS["WARMPOOL_API_PORT"], admin_key)
        reviewer = api(PORTS["WARMPOOL_API_2_PORT"], reviewer_key)
        served = serve(admin, reviewer, first, second, begin)
        stopped = stop(first, database_url)
        faults, ended = lost(database_url, stopped["under_way"])
        faults += [
            f"{service} exited {figures['exit_code']} after {figures['seconds']:.1f} s"
            for service, figures in stopped["exits"].items()
            if figures["exit_code"] != 0 or figures["seconds"] > GRACE[service]
        ]
        report(base, built, started, served, stopped, ended, faults)
    if faults:
        raise SystemExit(1)


def report(
    base: float | None,
    built: float,
    started: float,
    served: dict[str, Any],
    stopped: dict[str, Any],
    ended: dict[str, int],
    faults: list[str],
) -> None:
    mib = 1024 * 1024
    print(
        f"base image: {'present' if base is None else f'{base:.0f} s'} "
        f"({size(BASE_IMAGE) / mib:.0f} MiB)"
    )
    print(f"build: {built:.0f} s")
    for image in IMAGES:
        print(f"  {image}: {size(image) / mib:.0f} MiB")
    print(f"up and ready (both API processes): {started:.1f} s after the start")
    for worker in served["workers"]:
        disabled = "; ".join(f"{d}: {r}" for d, r in worker["disabled"].items()) or "none"
        print(
            f"  worker {worker['name']}: makes {', '.join(worker['domains'])}; disabled: {disabled}"
        )
    instance = served["instance"]
    print(
        f"serve: a {TRACK} mission in review {served['made_s']:.0f} s after the start, "
        "approved; "
        f"POST /v1/serve 200 in "
        f"{served['serve_ms']:.0f} ms: instance {instance['id']} of mission "
        f"{instance['mission_id']} ({instance['domain']}, {len(instance['files'])} files), "
        "the same read through the other API process"
    )
    print(
        f"stop (SIGTERM) with {len(stopped['under_way'])} generations under way; they ended "
        + "; ".join(f"{count} {outcome}" for outcome, count in sorted(ended.items()))
    )
    for service, figures in stopped["exits"].items():
        print(f"  {service}: exit {figures['exit_code']} in {figures['seconds']:.1f} s")
    print("left after the stop: " + ("; ".join(faults) if faults else "nothing"))


if __name__ == "__main__":
    main()
