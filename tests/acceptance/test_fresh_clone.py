"""A fresh clone in a folder whose parent is private (a root home, a `mktemp -d`), started with
the README's run command, `scripts/serve`, on the embedded defaults: every shipped domain
makes missions that pass their proofs, a reviewer approves one of each over HTTP, and every
track is then served from stock (`first_run`); the private folder stays private throughout."""

from __future__ import annotations

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
from tests.support.server import ROOT, Process, environment, free_port, wait_ready

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.fixture
def clone() -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="warmpool-private-"))  # mode 0700
    folder = parent / "warmpool"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(folder)], check=True, timeout=60)
    # This checkout's environment, as `scripts/bootstrap` makes it (anew it takes minutes);
    # PYTHONPATH below makes it import the clone's code.
    (folder / ".venv").symlink_to(ROOT / ".venv")
    yield folder
    pgdata = places.of(folder / ".warmpool").pgdata
    stop_postgres(pgdata)
    shutil.rmtree(pgdata, ignore_errors=True)
    shutil.rmtree(parent, ignore_errors=True)


def serve(clone: Path, logs: Path) -> tuple[Process, str, Path]:
    env = environment("unused", {"PYTHONPATH": str(clone), "WARMPOOL_REPLENISH_SECONDS": "2"})
    for default in ("WARMPOOL_DATABASE_URL", "WARMPOOL_DOMAIN_MAP"):
        del env[default]  # the embedded PostgreSQL, and the clone's shipped domain map
    port = free_port()
    stdout, stderr = logs / "serve.out", logs / "serve.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        popen = subprocess.Popen(
            ["scripts/serve", "--port", str(port)], cwd=clone, env=env, stdout=out, stderr=err
        )
    return Process(popen, stderr), f"http://127.0.0.1:{port}", stdout


@pytest.mark.timeout(360)
def test_a_fresh_clone_under_a_private_folder_makes_every_domain(
    clone: Path, tmp_path: Path
) -> None:
    shipped = domains.load(clone / "domain_map.yaml")
    process, url, stdout = serve(clone, tmp_path)
    try:
        # The first start on a machine installs the proof toolchain: minutes, once.
        wait_ready(url, process, timeout=300)
        keys = printed_keys(stdout.read_text())
        with httpx.Client(base_url=url, timeout=10) as client:
            serves_every_domain(client, keys, shipped)
    finally:
        returncode = process.stop(signal.SIGTERM)
    assert returncode == 0, process.output()
    assert clone.parent.stat().st_mode & 0o777 == 0o700, "nothing opened the private folder"
    assert (clone / ".warmpool" / "secret_key").exists(), "the secret stays in the data folder"
