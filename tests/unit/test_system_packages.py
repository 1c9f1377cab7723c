"""Where `scripts/system-packages` cannot install (no apt-get, or not root), it says in one line
what to install, and never fails: what is missing only disables the domains that need it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.server import ROOT


def test_without_apt_get_it_names_what_to_install(tmp_path: Path) -> None:
    # A PATH with the shell's few tools and none of the packages' commands, nor apt-get.
    for tool in ("bash", "id", "dirname", "basename"):
        found = shutil.which(tool)
        assert found is not None, tool
        (tmp_path / tool).symlink_to(found)

    done = subprocess.run(
        [str(tmp_path / "bash"), str(ROOT / "scripts" / "system-packages"), "serve"],
        env={**os.environ, "PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )

    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == (
        "serve: install bubblewrap nodejs npm (Debian: apt-get install bubblewrap nodejs npm); "
        "until then the domains that need them wait, as the pool page says\n"
    )
