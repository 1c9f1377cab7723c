"""Where `scripts/system-packages` cannot install (no apt-get, or not root), it says in one line
what to install, and never fails: what is missing only disables the domains that need it. A
package that apt cannot install keeps none of the others out."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.server import ROOT
from tests.support.tools import need


def run(bin_dir: Path, purpose: str) -> subprocess.CompletedProcess[str]:
    """The script with a PATH of the shell's few tools (and what `bin_dir` holds besides), so
    none of the packages' commands."""
    for tool in ("bash", "id", "dirname", "basename"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    return subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "scripts" / "system-packages"), purpose],
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def test_without_apt_get_it_names_what_to_install(tmp_path: Path) -> None:
    done = run(tmp_path, "serve")

    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == (
        "serve: install bubblewrap nodejs npm (Debian: apt-get install bubblewrap nodejs npm); "
        "until then the domains that need them wait, as the pool page says\n"
    )


def test_a_package_apt_cannot_install_keeps_none_of_the_others_out(tmp_path: Path) -> None:
    need(os.geteuid() == 0, "only root installs")
    calls = tmp_path / "apt-get.calls"
    apt_get = tmp_path / "apt-get"
    apt_get.write_text(
        f'#!{shutil.which("bash")}\necho "$*" >> {calls}\n'
        'case " $* " in *" update "*) exit 0;; *" chromium "*) exit 100;; esac\n'
    )
    apt_get.chmod(0o755)

    done = run(tmp_path, "test")

    assert done.returncode == 0
    installs = [line for line in calls.read_text().splitlines() if line.startswith("install")]
    assert len(installs) > 2, "all at once, then one by one"
    assert any(line.endswith(" bubblewrap") for line in installs)
    assert done.stderr.splitlines()[-1] == (
        "test: install chromium (Debian: apt-get install chromium); "
        "until then the domains that need them wait, as the pool page says"
    )
