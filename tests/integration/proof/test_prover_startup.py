"""What the start-up check reports, and the prover's promises: untrusted code never runs
unconfined, trusted code runs without bubblewrap, concurrent and cancelled runs leave nothing
behind."""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from pathlib import Path

import asyncpg
import pytest

from qa.policy import judge_gold
from qa.proof import ProofUnavailable, Prover
from tests.support.proving import leftovers, require
from tests.support.tools import need_command

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
    assert prover.describe() == [
        f"{language} ({trust}): ready"
        for language in ("python", "javascript", "sql")
        for trust in ("trusted", "untrusted")
    ]


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


async def test_a_missing_toolchain_is_named_with_the_way_to_install_it(work_root: Path) -> None:
    with tempfile.TemporaryDirectory() as empty:
        async with await Prover.start(
            work_root=work_root, toolchain_root=Path(empty), postgres_admin_url=None, slots=1
        ) as prover:
            python = prover.availability("python", "trusted") or ""
            javascript = prover.availability("javascript", "untrusted") or ""

    assert python.startswith("python proofs need the pytest toolchain in ")
    assert python.endswith("run scripts/toolchain (python -m qa.toolchain)")
    assert javascript.endswith("run scripts/toolchain (python -m qa.toolchain)")


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
    await asyncio.sleep(1)

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    assert leftovers(hostile_prover.slot_uids, work_root) == []


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
        database = None
        while database is None:
            await asyncio.sleep(0.1)
            database = await admin.fetchval(
                "SELECT datname FROM pg_stat_activity WHERE query LIKE '%' || $1 || '%' "
                "AND application_name = 'warmpool proof'",
                marker,
            )
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
