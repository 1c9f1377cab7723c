"""How python and javascript proofs run: pytest writing JUnit XML, Jest writing JSON.

Each harness names its command line, the memory it needs, the dependency file synthesized
beside the mission's files (so the project a candidate gets is complete), and how its report
becomes verdicts. The runner's exit status never makes a count; it only has to agree with
the report, or the run is inconclusive (a report rewritten behind the runner's back, say).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Protocol

from qa import jest_json, junit, toolchain
from qa.results import ProofLanguage, Reported, TestResult
from qa.sandbox import GIB
from qa.toolchain import Toolchain
from qa.workspace import REPORTS

_PYTEST_STATUS = {
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}


class Harness(Protocol):
    language: ProofLanguage
    report: str  # its file name under .proof/
    address_space: int

    def toolchain_problem(self, tools: Toolchain) -> str | None: ...

    def probe(self, tools: Toolchain) -> list[str]:
        """A command that shows the toolchain runs at all, for the start-up check."""
        ...

    def command(self, tools: Toolchain, tests: list[str]) -> list[str]: ...

    def shown(self, command: list[str]) -> str:
        """The command as a reviewer reads it, without the toolchain's long paths."""
        ...

    def dependencies(self) -> dict[str, str]: ...

    def environment(self) -> dict[str, str]: ...

    def read(self, report: bytes, workspace: Path) -> Reported: ...

    def exit_problem(self, exit_code: int | None, tests: list[TestResult]) -> str | None: ...


class Pytest:
    language: ProofLanguage = "python"
    report = "junit.xml"
    address_space = GIB

    def toolchain_problem(self, tools: Toolchain) -> str | None:
        return tools.python_problem()

    def probe(self, tools: Toolchain) -> list[str]:
        return [str(tools.python), "-I", "-c", "import pytest"]

    def command(self, tools: Toolchain, tests: list[str]) -> list[str]:
        return [
            str(tools.python),
            "-I",  # no PYTHON* variables, no user site
            "-B",  # no bytecode files
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--color=no",
            "--tb=short",
            "--rootdir=.",
            f"--junitxml={REPORTS}/{self.report}",
            "-o",
            "junit_family=xunit1",
            "-o",
            "junit_logging=no",
            "--",
            *tests,
        ]

    def shown(self, command: list[str]) -> str:
        return shlex.join(["python", *command[1:]])

    def dependencies(self) -> dict[str, str]:
        return {
            "requirements.txt": toolchain.pinned_requirement("python", "pytest") + "\n",
            # Ends pytest's search for configuration in the workspace: found in a folder
            # above (warmpool's own pyproject.toml, say), it would make pytest walk folders
            # the sandbox may not list, and apply options meant for something else.
            "pytest.ini": "[pytest]\n",
        }

    def environment(self) -> dict[str, str]:
        return {"PY_COLORS": "0"}

    def read(self, report: bytes, workspace: Path) -> Reported:
        return junit.parse(report)

    def exit_problem(self, exit_code: int | None, tests: list[TestResult]) -> str | None:
        broken = any(test.outcome in ("failed", "errored") for test in tests)
        if (exit_code, broken) in ((0, False), (1, True)):
            return None
        if exit_code in _PYTEST_STATUS:
            return f"pytest exited with status {exit_code} ({_PYTEST_STATUS[exit_code]})"
        return f"the report disagrees with pytest's exit status {exit_code}"


class Jest:
    language: ProofLanguage = "javascript"
    report = "jest.json"
    address_space = 4 * GIB  # Node reserves much address space up front

    def toolchain_problem(self, tools: Toolchain) -> str | None:
        return tools.javascript_problem()

    def probe(self, tools: Toolchain) -> list[str]:
        return [str(tools.node), str(tools.jest), "--version"]

    def command(self, tools: Toolchain, tests: list[str]) -> list[str]:
        config = {
            "rootDir": ".",
            "testEnvironment": "node",
            "transform": {},  # CommonJS as written: no Babel pass
            "watchman": False,
            "cache": False,
            "cacheDirectory": f"{REPORTS}/jest-cache",
            "modulePaths": [str(tools.jest_dir / "node_modules")],
            "testPathIgnorePatterns": ["/node_modules/", f"/{REPORTS}/"],
        }
        return [
            str(tools.node),
            str(tools.jest),
            "--ci",
            "--runInBand",
            "--json",
            f"--outputFile={REPORTS}/{self.report}",
            "--config",
            json.dumps(config),
            "--runTestsByPath",
            "--",
            *tests,
        ]

    def shown(self, command: list[str]) -> str:
        return shlex.join(["jest", *command[2:]])

    def dependencies(self) -> dict[str, str]:
        jest = toolchain.pinned_requirement("jest", "jest").partition("==")[2]
        package = {"private": True, "scripts": {"test": "jest"}, "devDependencies": {"jest": jest}}
        return {"package.json": json.dumps(package, indent=2) + "\n"}

    def environment(self) -> dict[str, str]:
        return {"FORCE_COLOR": "0", "NO_COLOR": "1"}

    def read(self, report: bytes, workspace: Path) -> Reported:
        return jest_json.parse(report, workspace)

    def exit_problem(self, exit_code: int | None, tests: list[TestResult]) -> str | None:
        failed = any(test.outcome == "failed" for test in tests)
        if (exit_code, failed) in ((0, False), (1, True)):
            return None
        return f"the report disagrees with Jest's exit status {exit_code}"
