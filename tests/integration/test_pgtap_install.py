"""pgTAP for a PostgreSQL without it (the embedded one): its files from Debian's package,
kept in the toolchain folder, so that copying them again needs no network."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from qa import pgtap
from tests.support.tools import need_command


@pytest.fixture
def folder() -> Iterator[Path]:
    # Not pytest's tmp_path: apt's unprivileged downloader must reach the download folder.
    made = Path(tempfile.mkdtemp(prefix="warmpool-pgtap-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def test_pgtap_comes_from_debian_and_then_from_the_toolchain_folder(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_command("apt-get", "apt")
    toolchain_root, first, second = folder / "toolchain", folder / "first", folder / "second"
    for extension_dir in (first, second):
        extension_dir.mkdir()

    pgtap.install(first, toolchain_root)
    monkeypatch.setenv("PATH", "")  # no apt-get, no network: the kept files are enough
    pgtap.install(second, toolchain_root)

    for extension_dir in (first, second):
        assert pgtap.installed(extension_dir)
        control = (extension_dir / "pgtap.control").read_text()
        version = control.split("default_version = '")[1].split("'")[0]
        assert (extension_dir / f"pgtap--{version}.sql").stat().st_size > 100_000
    assert sorted(path.name for path in first.iterdir()) == sorted(
        path.name for path in second.iterdir()
    )
