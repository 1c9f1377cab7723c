"""What the start-up check reports, and the prover's promises: untrusted code never runs
unconfined, trusted code runs without bubblewrap, each slot has a cgroup where the machine
allows and none outlives its prover, concurrent and cancelled runs leave nothing behind."""

from __future__ import annotations

import asyncio
import re
import secrets
import tempfile
from pathlib import Path

import asyncpg
import pytest

from qa.policy import judge_gold
from qa.proof import ProofUnavailable, Prover
from tests.support.polling import eventually
from tests.support.proving import leftovers, require
from tests.support.tools import need, need_command

SOLUTION = {"shop.py": "def price(quantity):\n    return 3 * quantity\n"}
TESTS = {
    "test_shop.py": "".join(
        f"def test_{n}():\n    from shop import price\n    assert price({n}) == {3 * n}\n\n"
        for n in range(1, 4)
    )
}
SPIN = {"test_shop.py": "def test_spin():\n    while True:\n        pass\n"}


async def test_on_this_machine_everything_is_ready(prover: Prover) -> None:
    need_command("bwrap", "bubblewrap")
    need(bool(prover.slot_cgroups), "this machine gives the proof slots no cgroups")
    *languages, limits = prover.describe()

    assert languages == [
        f"{language} ({trust}): ready"
        for language in ("python", "javascript", "sql")
        for trust in ("trusted", "untrusted")
    ]
    assert re.fullmatch(
        r"limits: each slot's processes together get at most 1024 MiB of memory and 64 tasks "
        r"\(cgroup v[12]\); an untrusted run writes at most 256 MiB",
        limits,
    ), limits


async def one_slot(work_root: Path, toolchain_root: Path, uids: range) -> Prover:
    return await Prover.start(
        work_root=work_root,
        toolchain_root=toolchain_root,
        postgres_admin_url=None,
        slots=1,
        uids=uids,
    )


async def test_without_a_uid_per_slot_the_limits_are_per_process_only(
    work_root: Path, toolchain_root: Path
) -> None:
    async with await one_slot(work_root, toolchain_root, range(61000, 61000)) as prover:
        limits = prover.describe()[-1]  # no uid to claim in that range

    assert limits == (
        "limits: per process only, as no cgroup caps a slot (the slots have no uid of their "
        "own); an untrusted run writes at most 256 MiB"
    )
    assert prover.slot_cgroups == ()


async def test_a_closed_prover_leaves_no_cgroup_and_clears_what_a_dead_one_left(
    work_root: Path, toolchain_root: Path
) -> None:
    async with await one_slot(work_root, toolchain_root, range(61170, 61184)) as first:
        need(bool(first.slot_cgroups), "this machine gives the proof slots no cgroups")
        [uid] = first.slot_uids
        assert uid is not None
        run = await first.run("python", SOLUTION, TESTS, trust="untrusted")
    assert judge_gold(run).accepted
    assert [folder for folder in first.slot_cgroups if folder.exists()] == []

    # What a prover killed mid-run leaves: its cgroups, with a process still in them.
    left = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        for folder in first.slot_cgroups:
            (folder / "slot-0").mkdir(parents=True)
            (folder / "slot-0" / "cgroup.procs").write_text(f"{left.pid}\n")
        async with await one_slot(work_root, toolchain_root, range(uid, uid + 1)) as second:
            assert second.slot_cgroups == first.slot_cgroups
            assert await asyncio.wait_for(left.wait(), timeout=5) == -9
            assert leftovers((), work_root, second.slot_cgroups) == []
        assert [folder for folder in second.slot_cgroups if folder.exists()] == []
    finally:
        if left.returncode is None:
            left.kill()
            await left.wait()


async def test_without_bubblewrap_untrusted_code_is_refused_and_trusted_code_runs(
    work_root: Path, toolchain_root: Path
) -> None:
    async with await Prover.start(
        work_root=work_root,
        toolchain_root=toolchain_root,
        postgres_admin_url=None,
        slots=1,
        bubblewrap="bwrap-that-is-not-installed",
    ) as prover:
        require(prover, "python", "trusted")
        refusal = prover.availability("python", "untrusted")
        with pytest.raises(ProofUnavailable) as raised:
            await prover.run("python", SOLUTION, TESTS, trust="untrusted")
        trusted = await prover.run("python", SOLUTION, TESTS, trust="trusted")

    assert refusal == (
        "untrusted code needs bubblewrap (Debian package bubblewrap), but "
        "bwrap-that-is-not-installed is not installed; refusing to run it unconfined"
    )
    assert str(raised.value) == refusal
    assert prover.availability("javascript", "untrusted") == refusal
    assert prover.availability("sql", "trusted") == (
        "sql proofs need a PostgreSQL admin URL (none was given)"
    )
    assert trusted.confinement == "limits"
    assert judge_gold(trusted).accepted


async def test_a_bubblewrap_too_old_to_bound_what_a_run_writes_is_refused(
    work_root: Path, toolchain_root: Path, tmp_path: Path
) -> None:
    old = tmp_path / "bwrap"
    old.write_text("#!/bin/sh\necho bubblewrap 0.6.1\n")
    old.chmod(0o755)
    async with await Prover.start(
        work_root=work_root,
        toolchain_root=toolchain_root,
        postgres_admin_url=None,
        slots=1,
        bubblewrap=str(old),
    ) as prover:
        refusal = prover.availability("python", "untrusted")

    assert refusal == (
        "untrusted code needs bubblewrap 0.8 or later (to bound what a run writes), but "
        f"{old} is 0.6.1; refusing to run it unconfined"
    )


async def test_a_missing_toolchain_is_named_with_the_way_to_install_it(work_root: Path) -> None:
    with tempfile.TemporaryDirectory() as empty:
        async with await Prover.start(
            work_root=work_root, toolchain_root=Path(empty), postgres_admin_url=None, slots=1
        ) as prover:
            python = prover.availability("python", "trusted") or ""
            javascript = prover.availability("javascript", "untrusted") or ""

    assert python.startswith("python proofs need the pytest toolchain in ")
    assert python.endswith("run warmpool toolchain (scripts/toolchain in a checkout)")
    assert javascript.endswith("run warmpool toolchain (scripts/toolchain in a checkout)")


async def test_a_work_folder_the_sandbox_cannot_reach_is_named(toolchain_root: Path) -> None:
    with tempfile.TemporaryDirectory() as private:  # mode 0700: no other uid may enter
        async with await Prover.start(
            work_root=Path(private) / "proofs",
            toolchain_root=toolchain_root,
            postgres_admin_url=None,
            slots=1,
        ) as prover:
            reason = prover.availability("python", "trusted") or ""

    need_command("bwrap", "bubblewrap")  # as root, with uids per slot
    assert reason.startswith("the sandbox uids cannot reach the work folder ")


async def test_languages_without_code_have_nothing_to_prove(prover: Prover) -> None:
    assert prover.availability("none", "trusted") == (
        "missions of language 'none' have no code to prove"
    )


async def test_concurrent_runs_share_the_slots(prover: Prover) -> None:
    require(prover, "python", "untrusted")
    wrong = {"shop.py": SOLUTION["shop.py"].replace("3 * quantity", "3 + quantity")}

    runs = await asyncio.gather(
        *(
            prover.run("python", solution, TESTS, trust="untrusted")
            for solution in (SOLUTION, wrong, SOLUTION, wrong, SOLUTION)
        )
    )

    assert [(run.passed, run.failed) for run in runs] == [(3, 0), (0, 3), (3, 0), (0, 3), (3, 0)]


async def test_a_cancelled_run_leaves_nothing_behind(
    hostile_prover: Prover, work_root: Path
) -> None:
    require(hostile_prover, "python", "untrusted")
    run = asyncio.create_task(hostile_prover.run("python", SOLUTION, SPIN, trust="untrusted"))

    async def spinning() -> bool:
        return bool(leftovers(hostile_prover.slot_uids, work_root, hostile_prover.slot_cgroups))

    await eventually(spinning, 30, "the run to be under way")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert leftovers(hostile_prover.slot_uids, work_root, hostile_prover.slot_cgroups) == []


async def test_a_cancelled_sql_run_drops_its_database(
    hostile_prover: Prover, postgres_server: str
) -> None:
    require(hostile_prover, "sql", "untrusted")
    marker = f"sleeping run {secrets.token_hex(4)}"
    run = asyncio.create_task(
        hostile_prover.run(
            "sql",
            {"a.sql": f'SELECT pg_sleep(60) AS "{marker}";\n'},
            {"t.sql": "SELECT 1;\n"},
            trust="untrusted",
        )
    )
    admin = await asyncpg.connect(postgres_server)
    try:

        async def sleeping_run() -> str | None:
            found: str | None = await admin.fetchval(
                "SELECT datname FROM pg_stat_activity WHERE query LIKE '%' || $1 || '%' "
                "AND application_name = 'warmpool proof'",
                marker,
            )
            return found

        database = await eventually(sleeping_run, 30, "the run's query to be under way")
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        remaining = await admin.fetchval(
            "SELECT count(*) FROM pg_database WHERE datname = $1", database
        )
    finally:
        await admin.close()

    assert database.startswith("warmpool_proof_run_")
    assert remaining == 0
