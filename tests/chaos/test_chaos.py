"""The chaos suite's short form (bench/chaos.py runs the long one): a few hundred jobs over
HTTP through two API processes and four workers on one PostgreSQL, while two workers are
killed with SIGKILL, three processes are restarted in turn with SIGTERM and PostgreSQL is
restarted. Every job ends, none twice, no model call is billed outside its job's attempts, the
global cap holds, and each killed worker's jobs are reclaimed within the heartbeat timeout plus
a tick (and the margin a loaded machine needs, see Scenario.reclaim_margin)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.chaos.engine import run
from tests.chaos.scenario import Scenario
from tests.support.proving import ensure_toolchain

pytestmark = pytest.mark.slow

SHORT = Scenario(jobs=240, seconds=24, kills=2, rolling=3, seed=20240611)


@pytest.mark.timeout(180)
async def test_jobs_survive_kills_a_rolling_restart_and_a_postgres_restart(tmp_path: Path) -> None:
    await asyncio.to_thread(ensure_toolchain)
    report = await run(SHORT, tmp_path)
    print(report.summary())
    assert not report.problems, f"{report.summary()}\nprocess logs in {tmp_path}"
