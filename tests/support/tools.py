"""A test that needs something this machine lacks skips with the reason locally, and fails in
CI (CI=true), where `.ci/run` installs everything."""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def need(available: bool, reason: str) -> None:
    if available:
        return
    if in_ci():
        pytest.fail(f"CI must provide this, but: {reason}")
    pytest.skip(reason)


def need_command(command: str, package: str) -> str:
    path = shutil.which(command)
    need(path is not None, f"{command} is not installed (Debian package {package})")
    assert path is not None
    return path
