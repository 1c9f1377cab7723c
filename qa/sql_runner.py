"""SQL proofs: pgTAP xUnit tests run over asyncpg, as a role without privileges, in a database
made for the run. Nothing passes through psql on the host (its `\\!` runs shell commands).

The convention the missions follow: solution files are plain SQL scripts (schema, data,
functions) run in sorted path order; test files define pgTAP test functions `test_*` in
schema public, each RETURNS SETOF TEXT. After both, each test function runs through
`tap.runtests()` on its own, in a transaction rolled back afterwards: pgTAP's runner
catches only RAISE EXCEPTION, so one test dying of, say, a division by zero would otherwise
abort all the others. One verdict per test function, read by our TAP parser, and a pass only
where the lines of its own assertions back it.

What a run may take is bounded as qa/sql_bounds.py says: a file that leaves a limit of the
role raised fails the proof, and the run's watchdog stops it past a bound.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping

import asyncpg

from qa import tap, workspace
from qa.databases import ProofDatabases, statements
from qa.results import Outcome, ProofRun, Reported, TestResult, Trust, proof_run, short
from qa.slots import Slot
from qa.sql_bounds import BoundCrossed

LINE_CHARACTERS = 2000
MAX_LINES = 5000
COMMAND = (
    "each solution file, each test file, then SELECT * FROM tap.runtests('public', "
    "'^test_name$') per test function, over asyncpg as role {role} (no superuser)"
)


class _Inconclusive(Exception):
    pass


class SqlRunner:
    language = "sql"

    def __init__(self, databases: ProofDatabases, *, time_limit_s: float) -> None:
        self._databases = databases
        self._time_limit_s = time_limit_s

    async def run(
        self,
        solution_files: Mapping[str, str],
        test_files: Mapping[str, str],
        *,
        slot: Slot,
        trust: Trust,
    ) -> ProofRun:
        started = time.monotonic()
        log: list[str] = []
        role = "(none)"
        try:
            workspace.check(solution_files, test_files)
            async with asyncio.timeout(self._time_limit_s) as limit:
                async with self._databases.disposable() as run:
                    role = run.role
                    reported = await run.watchdog.guard(
                        self._prove(run.connection, solution_files, test_files, log)
                    )
        except (workspace.InvalidFiles, _Inconclusive, BoundCrossed) as error:
            reported = Reported([], str(error))
        except TimeoutError:
            if not limit.expired():
                raise
            reported = Reported([], f"timed out after {self._time_limit_s:g} s")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            reported = Reported([], f"the proof database failed: {error}")
        return proof_run(
            language="sql",
            trust=trust,
            confinement="database role",
            command=COMMAND.format(role=role),
            duration_s=time.monotonic() - started,
            log="\n".join(log),
            tests=reported.tests,
            problem=reported.problem,
        )

    async def _prove(
        self,
        connection: asyncpg.Connection,
        solution_files: Mapping[str, str],
        test_files: Mapping[str, str],
        log: list[str],
    ) -> Reported:
        for kind, files in (("solution", solution_files), ("test", test_files)):
            for path in sorted(files):
                try:
                    # A script of nothing but comments trips asyncpg: end every one with a no-op.
                    await connection.execute(f"{files[path]}\n;SELECT NULL")
                except asyncpg.QueryCanceledError:
                    raise _Inconclusive(self._timed_out()) from None
                except asyncpg.PostgresError as error:
                    raise _Inconclusive(f"the {kind} file {path} failed: {error}") from None
                await self._check_limits(connection, f"the {kind} file {path}")
        names = [row["name"] for row in await connection.fetch(statements["proof_test_functions"])]
        if not names:
            raise _Inconclusive("no test ran: the test files define no function public.test_*")
        return Reported([await self._run_test(connection, name, log) for name in names])

    async def _run_test(
        self, connection: asyncpg.Connection, name: str, log: list[str]
    ) -> TestResult:
        test_id = f"public.{name}"
        transaction = connection.transaction()
        await transaction.start()
        try:
            await connection.execute(
                statements["proof_test_prepare"], self._databases.statement_timeout
            )
            rows = await connection.fetch(
                statements["proof_test_run"], _exactly(name), LINE_CHARACTERS, MAX_LINES
            )
        except asyncpg.QueryCanceledError:
            raise _Inconclusive(self._timed_out()) from None
        except asyncpg.PostgresError as error:
            log.append(f"# {test_id}() died: {error}")
            return TestResult(id=test_id, outcome="failed", message=short(f"died: {error}"))
        finally:
            await transaction.rollback()
        lines = [row["line"] for row in rows]
        log += lines
        if len(lines) == MAX_LINES:
            raise _Inconclusive(f"{test_id} printed more than {MAX_LINES} lines of TAP")
        stream = tap.parse(lines)
        problem = stream.problem()
        if problem is None and len(stream.results) != 1:
            problem = f"pgTAP reported {len(stream.results)} results for one test function"
        if problem is not None:
            raise _Inconclusive(f"{test_id}: {problem}")
        result = stream.results[0]
        if result.ok and (problem := _unbacked(result)) is not None:
            raise _Inconclusive(f"{test_id}: {problem}")
        return TestResult(id=test_id, outcome=_outcome(result), message=_message(result))

    async def _check_limits(self, connection: asyncpg.Connection, what: str) -> None:
        limits = self._databases.session_limits()
        raised = await connection.fetch(statements["proof_session_limits_raised"], list(limits))
        if raised:
            raise _Inconclusive(
                f"{what} raised "
                + ", ".join(
                    f"{row['name']} to {row['raised_to']} (a proof runs with {limits[row['name']]})"
                    for row in raised
                )
            )

    def _timed_out(self) -> str:
        return f"timed out: a statement ran past the {self._databases.statement_timeout} limit"


def _exactly(name: str) -> str:
    """A regular expression matching `name` alone, for runtests()."""
    return "^" + re.sub(r"([^A-Za-z0-9_])", r"\\\1", name) + "$"


def _unbacked(result: tap.Result) -> str | None:
    """Why a test function's `ok` does not follow from its own assertions' lines. pgTAP's runner
    reads its verdict from its bookkeeping, which code running in the test can change (a TODO
    begun, the failures' count reset); the lines were written as each assertion ran."""
    assertions = tap.parse(result.details)
    problem = assertions.problem()
    if problem is None and not assertions.results:
        problem = "it ran no assertion"
    if problem is None and not all(
        line.ok and line.directive != "TODO" for line in assertions.results
    ):
        problem = "pgTAP counted it as passed, but not every assertion in it passed"
    return None if problem is None else f"its assertions do not back pgTAP's verdict: {problem}"


def _outcome(result: tap.Result) -> Outcome:
    if result.directive is not None:
        return "skipped"
    return "passed" if result.ok else "failed"


def _message(result: tap.Result) -> str:
    """The failed assertions and their diagnostics (`have: 2`, `want: 3`), on one line."""
    if result.ok:
        return ""
    kept = [
        line.lstrip("# ").strip()
        for line in result.details
        if line.startswith(("not ok", "#"))
        and not line.startswith(("# Subtest", "# Looks like", "# Failed test"))
    ]
    return short("; ".join(kept))
