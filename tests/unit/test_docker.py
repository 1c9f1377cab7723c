"""The Docker deployment as written: the compose file parses and wires PostgreSQL, a one-shot
migration, two API processes and two workers, each with a health check, and workers get
longer than their shutdown grace to stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"


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
    assert set(found) == {"postgres", "migrate", "api", "worker"}
    assert found["postgres"]["build"] == "postgres"
    assert found["migrate"]["command"] == ["warmpool", "migrate"]
    assert found["migrate"]["restart"] == "no"
    assert found["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in ("api", "worker"):
        service = found[name]
        assert service["deploy"]["replicas"] == 2
        assert service["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
        assert service["build"]["dockerfile"] == "docker/Dockerfile"
        assert "healthcheck" in service
    assert "--no-worker" in found["api"]["command"]
    assert any("/readyz" in part for part in found["api"]["healthcheck"]["test"])
    assert found["worker"]["command"] == ["warmpool", "worker"]


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


def test_the_image_runs_as_an_unprivileged_user_with_no_build_tools() -> None:
    final = (DOCKER / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    [install] = [line for line in final.splitlines() if "apt-get install" in line]
    assert install.split("--no-install-recommends")[1].split() == ["nodejs", "bubblewrap", "\\"]
    assert "USER warmpool" in final
