"""Why a domain waits names the missing tool and how to get it."""

from __future__ import annotations

from pathlib import Path

import pytest

from qa import toolchain


def test_a_machine_without_node_is_told_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no node on it

    tools = toolchain.locate(tmp_path / "toolchain")

    assert tools.javascript_problem() == (
        "javascript proofs need Node.js 18+ (Debian package nodejs), which is not on PATH"
    )
    assert tools.python_problem() == (
        f"python proofs need the pytest toolchain in {tools.python_dir}: "
        "run warmpool toolchain (scripts/toolchain in a checkout)"
    )
