"""The chaos suite's short form (bench/chaos.py runs the long one): hundreds of jobs over HTTP
through two API processes and four workers, their model calls background responses through the
real openai SDK to the loopback stub, on one PostgreSQL whose default isolation is set to
REPEATABLE READ, while warmpool's sessions are terminated twice a second for 3 s, PostgreSQL is
restarted, two workers are killed with SIGKILL and three processes are restarted in turn with
SIGTERM. Every job ends, none twice, no model call is billed outside its job's attempts, each
job's billed calls are the calls the stub served (but those a kill cut off before the stub
named them), no job pays twice for one purpose and try, the
global cap holds, no answer is unexpected (a 500), each killed worker's jobs are reclaimed
within the heartbeat timeout plus a tick (and the margin a loaded machine needs, see
Scenario.reclaim_margin), and once the terminations and the restart are over, no job stays
generating past that bound and completions are back to the offered rate within 10 s."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.chaos.engine import run
from tests.chaos.scenario import Scenario
from tests.support.proving import ensure_toolchain

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

# 10 jobs/s, each job's two model calls background responses through the SDK to the stub:
# enough statements under way that the terminations cut some mid-flight.
SHORT = Scenario(
    jobs=340,
    seconds=34,
    kills=2,
    rolling=3,
    terminate_seconds=3,
    model_delay=0.05,
    seed=20240611,
)


@pytest.mark.timeout(180)
async def test_jobs_survive_kills_restarts_terminated_sessions_and_repeatable_read(
    tmp_path: Path,
) -> None:
    await asyncio.to_thread(ensure_toolchain)
    report = await run(SHORT, tmp_path)
    print(report.summary())
    assert not report.problems, f"{report.summary()}\nprocess logs in {tmp_path}"
