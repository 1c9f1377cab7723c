"""The suite's own layout: what tests share lives in tests/support, never in a test module."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]


def test_no_module_of_the_suite_imports_a_test_module() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in imported_modules(path)
        if module.startswith("tests.") and module.rpartition(".")[2].startswith("test_")
    ]
    assert offenders == [], "move what they share to tests/support"
