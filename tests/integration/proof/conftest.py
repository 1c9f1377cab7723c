"""A prover for the proof tests, built once per session, and the check that every test leaves
no process of a sandbox uid or in a slot's cgroup, and no run folder behind."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from qa.proof import Prover
from tests.support import proving

_provers: list[Prover] = []


@pytest.fixture(scope="session")
def work_root() -> Iterator[Path]:
    # Under /tmp, not pytest's private tmp_path: the sandbox uids must reach their folders.
    root = Path(tempfile.mkdtemp(prefix="warmpool-proof-tests-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
async def toolchain_root() -> Path:
    return await asyncio.to_thread(proving.ensure_toolchain)


@asynccontextmanager
async def _started(
    work_root: Path, toolchain_root: Path, admin_url: str, **settings: Any
) -> AsyncIterator[Prover]:
    async with await Prover.start(
        work_root=work_root, toolchain_root=toolchain_root, postgres_admin_url=admin_url, **settings
    ) as started:
        _provers.append(started)
        yield started


@pytest.fixture(scope="session")
async def prover(
    work_root: Path, toolchain_root: Path, postgres_server: str
) -> AsyncIterator[Prover]:
    async with _started(
        work_root, toolchain_root, postgres_server, slots=2, time_limit_s=30
    ) as started:
        yield started


@pytest.fixture(scope="session")
async def hostile_prover(
    work_root: Path, toolchain_root: Path, postgres_server: str
) -> AsyncIterator[Prover]:
    """A short time limit, so that code that never ends costs little."""
    async with _started(
        work_root, toolchain_root, postgres_server, slots=1, time_limit_s=3
    ) as started:
        yield started


@pytest.fixture(autouse=True)
def nothing_left_behind(work_root: Path) -> Iterator[None]:
    yield
    uids = tuple(uid for started in _provers for uid in started.slot_uids)
    slot_cgroups = tuple(folder for started in _provers for folder in started.slot_cgroups)
    assert proving.leftovers(uids, work_root, slot_cgroups) == []
