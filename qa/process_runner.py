"""Python and javascript proofs: the mission's files in a fresh workspace, the harness's
command in the sandbox, its report read back into verdicts, the workspace removed."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from qa import workspace
from qa.harnesses import Harness
from qa.results import ProofRun, Reported, Trust, proof_run
from qa.sandbox import Execution, Isolation, RunLimits, Sandbox
from qa.slots import Slot
from qa.toolchain import Toolchain
from qa.workspace import InvalidFiles, UnreadableReport, Workspace

REPORT_BYTES = 4 * 1024 * 1024
PATH = "/usr/local/bin:/usr/bin:/bin"


class ProcessRunner:
    def __init__(
        self,
        harness: Harness,
        *,
        sandbox: Sandbox,
        tools: Toolchain,
        runs: Path,
        time_limit_s: float,
    ) -> None:
        self.language = harness.language
        self._harness = harness
        self._sandbox = sandbox
        self._tools = tools
        self._runs = runs
        self._limits = RunLimits(wall_s=time_limit_s, address_space=harness.address_space)

    def toolchain_problem(self) -> str | None:
        return self._harness.toolchain_problem(self._tools)

    async def check(self, slot: Slot, isolation: Isolation) -> str | None:
        """Run the toolchain's probe as a proof would run; None when it works."""
        space = Workspace.create(self._runs, slot.uid)
        try:
            execution = await self._execute(
                self._harness.probe(self._tools), space, slot, isolation
            )
        finally:
            space.remove()
        if execution.exit_code == 0:
            return None
        detail = execution.problem or execution.output.strip()[-500:] or "no output"
        return f"{self.language} proofs cannot start their toolchain ({isolation}): {detail}"

    async def run(
        self,
        solution_files: Mapping[str, str],
        test_files: Mapping[str, str],
        *,
        slot: Slot,
        trust: Trust,
    ) -> ProofRun:
        started = time.monotonic()
        isolation: Isolation = "bubblewrap" if trust == "untrusted" else "limits"
        tests = sorted(test_files)
        space = Workspace.create(self._runs, slot.uid)
        command = self._harness.command(self._tools, tests)
        log = ""
        try:
            workspace.check(solution_files, test_files)
            space.write({**self._harness.dependencies(), **solution_files, **test_files})
            report = space.expect_report(self._harness.report)
            execution = await self._execute(command, space, slot, isolation, outputs=[report])
            log = execution.output
            reported = self._read(space, execution)
        except InvalidFiles as error:
            reported = Reported([], str(error))
        finally:
            space.remove()
        return proof_run(
            language=self.language,
            trust=trust,
            confinement=isolation,
            command=self._harness.shown(command),
            duration_s=time.monotonic() - started,
            log=log,
            tests=reported.tests,
            problem=reported.problem,
        )

    async def _execute(
        self,
        command: list[str],
        space: Workspace,
        slot: Slot,
        isolation: Isolation,
        outputs: Sequence[str] = (),
    ) -> Execution:
        reports = space.path / workspace.REPORTS
        environment = {
            "PATH": PATH,
            "HOME": str(reports / "home"),
            "TMPDIR": str(reports / "tmp"),
            "LANG": "C.UTF-8",
            **self._harness.environment(),
        }
        return await self._sandbox.run(
            command,
            workspace=space.path,
            slot=slot,
            limits=self._limits,
            env=environment,
            isolation=isolation,
            outputs=outputs,
        )

    def _read(self, space: Workspace, execution: Execution) -> Reported:
        if execution.problem:
            return Reported([], execution.problem)
        try:
            report = space.read_report(self._harness.report, REPORT_BYTES)
        except UnreadableReport as error:
            return Reported([], str(error))
        reported = self._harness.read(report, space.path)
        if reported.problem:
            return reported
        return Reported(
            reported.tests, self._harness.exit_problem(execution.exit_code, reported.tests)
        )
