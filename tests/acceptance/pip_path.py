"""The README's "Running it for real" steps, run as they stand there (with this checkout's path,
and a port of their own) in a fresh folder under a private one: pip installs warmpool into a
new virtual environment outside the source tree, `warmpool toolchain` gets the proof tools, and
`warmpool serve` on the embedded defaults then makes and serves every domain (`first_run`).

Minutes long, so not named as the suite's tests are: `scripts/pip-check` runs it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core import domains
from server import places
from tests.support.embedded import printed_keys, stop_postgres
from tests.support.first_run import serves_every_domain
from tests.support.server import ROOT, Process, free_port, wait_ready

pytestmark = pytest.mark.slow

README = (ROOT / "README.md").read_text(encoding="utf-8")
CHECKOUT = "/path/to/warmpool"


def readme_steps() -> list[str]:
    """The commands of the first shell block under "Running it for real", without comments."""
    section = README[README.index("## Running it for real") :]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


@pytest.fixture
def folder() -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="warmpool-operator-"))  # mode 0700
    made = parent / "warmpool"
    made.mkdir()
    yield made
    pgdata = places.of(made / ".warmpool").pgdata
    stop_postgres(pgdata)
    shutil.rmtree(pgdata, ignore_errors=True)
    shutil.rmtree(parent, ignore_errors=True)


def operator_environment() -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WARMPOOL_", "OPENAI_", "VIRTUAL_ENV", "PYTHON"))
    }
    # A test's pace: passes every 2 s, and a stop that waits 1 s for generations under way.
    env.update(WARMPOOL_REPLENISH_SECONDS="2", WARMPOOL_SHUTDOWN_GRACE_SECONDS="1")
    return env


@pytest.mark.timeout(600)
def test_the_readme_steps_install_and_serve_every_domain(folder: Path, tmp_path: Path) -> None:
    *setup, serve = [step.replace(CHECKOUT, str(ROOT)) for step in readme_steps()]
    assert serve.endswith("warmpool serve"), serve
    env = operator_environment()
    for step in setup:
        done = subprocess.run(
            ["bash", "-c", step],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=500,
            check=False,
        )
        assert done.returncode == 0, f"{step}:\n{done.stdout}{done.stderr}"
    assert not (folder / "venv").resolve().is_relative_to(ROOT), "outside the source tree"

    port = free_port()
    stdout, stderr = tmp_path / "serve.out", tmp_path / "serve.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        popen = subprocess.Popen(
            ["bash", "-c", f"exec {serve} --port {port}"],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=err,
        )
    process = Process(popen, stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, timeout=120)
        with httpx.Client(base_url=url, timeout=10) as client:
            serves_every_domain(
                client, printed_keys(stdout.read_text()), domains.load(folder / "domain_map.yaml")
            )
    finally:
        returncode = process.stop(signal.SIGTERM)
    assert returncode == 0, process.output()
