"""pgTAP for a PostgreSQL that has none, such as the embedded one: its SQL and control files
copied into the server's `share/extension`.

pgTAP is SQL and PL/pgSQL only, so one build serves every PostgreSQL from 9.6 on. The files
come from a Debian pgTAP package already installed on this machine, else from Debian's
archive (`apt-get download`, never installed, so it pulls in no PostgreSQL server). They are
kept in the toolchain folder, so copying them again (after the server's package was
reinstalled, say) needs no network.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from qa.toolchain import ToolchainError

_DEBIAN_SHARE = Path("/usr/share/postgresql")
_CACHE = "pgtap"
_PACKAGE = re.compile(r"^postgresql-(\d+)-pgtap$")


def installed(extension_dir: Path) -> bool:
    return (extension_dir / "pgtap.control").is_file()


def install(extension_dir: Path, toolchain_root: Path) -> None:
    """Put pgTAP into `extension_dir` unless it is there; raises `ToolchainError` saying why not."""
    if installed(extension_dir):
        return
    if not os.access(extension_dir, os.W_OK):
        raise ToolchainError(f"pgTAP cannot be copied into {extension_dir}: it is not writable")
    cache = toolchain_root / _CACHE
    if not installed(cache):
        _fill(cache)
    # The control file last: once it is there, `installed` holds for every reader.
    for source in sorted(cache.glob("pgtap*"), key=lambda path: path.suffix == ".control"):
        shutil.copy(source, extension_dir / source.name)


def _fill(cache: Path) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache.parent) as temporary:
        work = Path(temporary)
        # Readable by apt's unprivileged downloader, which a private folder would refuse.
        os.chmod(work, 0o755)
        found = _newest_in(_DEBIAN_SHARE) or _download(work)
        partial = work / _CACHE
        partial.mkdir(mode=0o755)
        for source in found.glob("pgtap*"):
            shutil.copy(source, partial / source.name)
        shutil.rmtree(cache, ignore_errors=True)
        partial.rename(cache)  # whole or not at all: `installed` looks for the control file


def _newest_in(share: Path) -> Path | None:
    """The extension folder of the newest PostgreSQL major under `share` that has pgTAP."""
    controls = sorted(share.glob("*/extension/pgtap.control"), key=lambda c: _major(c.parts[-3]))
    return controls[-1].parent if controls else None


def _download(work: Path) -> Path:
    if shutil.which("apt-get") is None:
        raise ToolchainError(
            "pgTAP comes from Debian's postgresql-<major>-pgtap package, but apt-get is not "
            "on this machine: copy pgTAP's files into the PostgreSQL's share/extension"
        )
    package = _newest_package()
    if package is None and os.geteuid() == 0:
        _run(["apt-get", "update", "-qq"], work)  # a fresh machine's package lists are empty
        package = _newest_package()
    if package is None:
        raise ToolchainError(
            "no postgresql-<major>-pgtap package is known to apt: run apt-get update"
        )
    _run(["apt-get", "download", "-qq", package], work)
    (deb,) = work.glob("*.deb")
    _run(["dpkg-deb", "-x", str(deb), str(work / "unpacked")], work)
    found = _newest_in(work / "unpacked" / _DEBIAN_SHARE.relative_to("/"))
    if found is None:
        raise ToolchainError(f"{deb.name} holds no pgtap.control")
    return found


def _newest_package() -> str | None:
    done = subprocess.run(
        ["apt-cache", "search", "--names-only", r"^postgresql-[0-9]+-pgtap$"],
        capture_output=True,
        text=True,
        check=False,
    )
    names = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    packages = [name for name in names if _PACKAGE.match(name)]
    return max(packages, key=lambda name: _major(name.split("-")[1]), default=None)


def _run(command: list[str], cwd: Path) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ToolchainError(
            f"{' '.join(command)} failed with status {done.returncode}: "
            f"{(done.stdout + done.stderr).strip()[-2000:]}"
        )


def _major(text: str) -> int:
    return int(text) if text.isdigit() else 0
