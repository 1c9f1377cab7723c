"""The Docker deployment as written: the compose file parses and wires PostgreSQL, a separate
PostgreSQL with pgTAP for SQL proofs, a one-shot migration, two API processes and two workers,
each with a health check, and workers get longer than their shutdown grace to stop; on the
host's network each process gets a port and a worker name of its own and finds PostgreSQL
where it listens; what the image's build stage copies installs as a wheel holding every file
of warmpool's packages (SQL, prompts, templates, the catalog). scripts/docker-check builds
and runs it all (bench/docker.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
PACKAGES = ("core", "server", "generation", "qa", "pool")


def services(name: str) -> dict[str, Any]:
    compose = yaml.safe_load((DOCKER / name).read_text())
    assert isinstance(compose, dict)
    found: dict[str, Any] = compose["services"]
    return found


def seconds(duration: str) -> int:
    assert duration.endswith("s")
    return int(duration[:-1])


def test_the_compose_file_wires_postgres_migrate_two_apis_and_two_workers() -> None:
    found = services("compose.yaml")
    assert set(found) == {"postgres", "proof-postgres", "migrate", "api", "worker"}
    assert found["migrate"]["command"] == ["warmpool", "migrate"]
    assert found["migrate"]["restart"] == "no"
    assert found["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    migrated = {"migrate": {"condition": "service_completed_successfully"}}
    assert found["api"]["depends_on"] == migrated
    assert found["worker"]["depends_on"] == {
        **migrated,
        "proof-postgres": {"condition": "service_healthy"},
    }
    for name in ("api", "worker"):
        service = found[name]
        assert service["deploy"]["replicas"] == 2
        assert service["build"]["dockerfile"] == "docker/Dockerfile"
        assert "healthcheck" in service
    assert "--no-worker" in found["api"]["command"]
    assert "/readyz" in found["api"]["healthcheck"]["test"]
    assert found["worker"]["command"] == ["warmpool", "worker"]


def test_sql_proofs_run_on_a_postgres_of_their_own_with_pgtap_and_a_memory_limit() -> None:
    found = services("compose.yaml")
    main, proofs = found["postgres"], found["proof-postgres"]
    assert proofs["build"]["context"] == "postgres"
    assert "postgresql-15-pgtap" in (DOCKER / "postgres" / "Dockerfile").read_text()
    assert "build" not in main, "warmpool's own database needs no pgTAP"
    assert proofs["image"] != main["image"]
    assert proofs["deploy"]["resources"]["limits"]["memory"]
    assert "volumes" not in proofs, "nothing on the proof server must survive"
    assert "healthcheck" in proofs
    worker = found["worker"]["environment"]
    database = urlsplit(interpolated(worker["WARMPOOL_DATABASE_URL"]))
    proof = urlsplit(interpolated(worker["WARMPOOL_PROOF_DATABASE_URL"]))
    assert (database.hostname, proof.hostname) == ("postgres", "proof-postgres")
    assert proof.username == proofs["environment"]["POSTGRES_USER"]
    assert proof.path == "/" + proofs["environment"]["POSTGRES_DB"]
    assert proof.password == interpolated(proofs["environment"]["POSTGRES_PASSWORD"])
    assert proof.password != interpolated(main["environment"]["POSTGRES_PASSWORD"])


def interpolated(value: str) -> str:
    """`value` with each ${VARIABLE...} as compose would fill it from a VARIABLE set to its
    own name in lower case."""
    return re.sub(r"\$\{([A-Z_]+)[^}]*\}", lambda match: match[1].lower(), value)


def test_docker_waits_longer_than_the_shutdown_grace_before_it_kills() -> None:
    found = services("compose.yaml")
    for name in ("api", "worker"):
        grace = float(found[name]["environment"]["WARMPOOL_SHUTDOWN_GRACE_SECONDS"])
        assert seconds(found[name]["stop_grace_period"]) > grace


def test_untrusted_proofs_are_an_opt_in_that_starts_workers_as_root_with_few_capabilities() -> None:
    [(name, worker)] = services("compose.untrusted-proofs.yaml").items()
    assert name == "worker"
    assert worker["user"] == "root"
    assert worker["cap_drop"] == ["ALL"]
    assert "SYS_ADMIN" not in worker["cap_add"]
    # bubblewrap mounts a /proc of its own: "Can't mount proc" under the engine's masks.
    assert "systempaths=unconfined" in worker["security_opt"]


def test_the_image_runs_as_an_unprivileged_user_with_no_build_tools() -> None:
    final = (DOCKER / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    [install] = [line for line in final.splitlines() if "apt-get install" in line]
    assert install.split("--no-install-recommends")[1].split() == ["nodejs", "bubblewrap", "\\"]
    assert "USER warmpool" in final


def builder_copies() -> list[str]:
    """What the Dockerfile's build stage copies from the repository."""
    copied: list[str] = []
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if line.startswith("FROM ") and copied:
            break  # the final stage copies from the build stage, not the repository
        if line.startswith("COPY ") and "--from" not in line:
            copied += line.split()[1:-1]
    return copied


@pytest.mark.slow
def test_what_the_image_builds_from_installs_every_file_of_the_packages(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    copied = builder_copies()
    assert set(PACKAGES) <= set(copied), copied
    ignore = shutil.ignore_patterns("__pycache__")
    for name in copied:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy(path, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), source],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("warmpool-*.whl")
    installed = set(zipfile.ZipFile(wheel).namelist())
    files = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sorted(files - installed) == [], "files the image would lack"


class ComposeLoader(yaml.SafeLoader):
    """Reads compose's `!reset`: drop what the file below set."""


ComposeLoader.add_constructor("!reset", lambda loader, node: None)


def on_host_network() -> dict[str, Any]:
    """compose.host-network.yaml's services over compose.yaml's, merged the way compose
    merges them (mappings key by key, the rest replaced), `extends` resolved, and each
    ${VARIABLE:-default} at its default."""
    text = re.sub(
        r"\$\{[A-Z_0-9]+:-([^}]*)\}", r"\1", (DOCKER / "compose.host-network.yaml").read_text()
    )
    override = yaml.load(text, Loader=ComposeLoader)["services"]
    merged = services("compose.yaml")
    for name, service in override.items():
        base = merged.get(name) or merged[service.pop("extends")]
        merged[name] = merge(base, service)
    return merged


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = merge(base[key], value)
        else:
            merged[key] = value
    return merged


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def listens_on(service: dict[str, Any]) -> int:
    [setting] = [part for part in service["command"] if part.startswith("port=")]
    return int(setting.removeprefix("port="))


def test_on_the_host_network_each_process_has_its_own_port_and_worker_name() -> None:
    found = on_host_network()
    assert set(found) == {
        "postgres",
        "proof-postgres",
        "migrate",
        "api",
        "api-2",
        "worker",
        "worker-2",
    }
    assert {service["network_mode"] for service in found.values()} == {"host"}
    apis = [found["api"], found["api-2"]]
    ports = [int(option(api["command"], "--port")) for api in apis]
    assert len(set(ports)) == 2
    for api, port in zip(apis, ports, strict=True):
        assert api["ports"] is None, "a host-network container publishes no port"
        assert option(api["command"], "--host") == "127.0.0.1"
        assert f"http://127.0.0.1:{port}/readyz" in api["healthcheck"]["test"]
        assert api["deploy"]["replicas"] == 1
    workers = [found["worker"], found["worker-2"]]
    names = {worker["environment"]["WARMPOOL_WORKER_NAME"] for worker in workers}
    assert len(names) == 2
    assert all(worker["deploy"]["replicas"] == 1 for worker in workers)


def test_on_the_host_network_every_process_finds_postgres_where_it_listens() -> None:
    found = on_host_network()
    database, proofs = listens_on(found["postgres"]), listens_on(found["proof-postgres"])
    assert database != proofs
    assert f"--port={database}" in found["postgres"]["healthcheck"]["test"]
    assert f"--port={proofs}" in found["proof-postgres"]["healthcheck"]["test"]
    for name in ("migrate", "api", "api-2", "worker", "worker-2"):
        url = urlsplit(interpolated(found[name]["environment"]["WARMPOOL_DATABASE_URL"]))
        assert (url.hostname, url.port) == ("127.0.0.1", database), name
    for name in ("worker", "worker-2"):
        url = urlsplit(interpolated(found[name]["environment"]["WARMPOOL_PROOF_DATABASE_URL"]))
        assert (url.hostname, url.port) == ("127.0.0.1", proofs), name
