"""The tools that proofs run, installed once into a shared folder that proofs only read: a Python
virtual environment with the pinned pytest, and Jest from the committed lock file.

Installing needs the network (PyPI, the npm registry); a proof never does. Each tool lives in
a folder named by the digest of its pins, so changed pins install beside the old ones, and a
stamp written last tells a finished install from an interrupted one.

    warmpool toolchain                  # into the data folder's toolchain, with pgTAP
    python -m qa.toolchain [FOLDER]     # pytest and Jest only (default .warmpool/toolchain)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DEFAULT_ROOT = Path(".warmpool/toolchain")
MINIMUM_NODE = 18
_COMPLETE = ".complete"
_PYTHON_PINS = ("requirements.txt",)
_JEST_PINS = ("package.json", "package-lock.json")


class ToolchainError(RuntimeError):
    """An install step failed; the message names the step and its output."""


@dataclass(frozen=True)
class Toolchain:
    root: Path
    python_dir: Path
    jest_dir: Path
    node: Path | None
    node_version: str | None

    @property
    def python(self) -> Path:
        return self.python_dir / "bin" / "python"

    @property
    def jest(self) -> Path:
        return self.jest_dir / "node_modules" / "jest" / "bin" / "jest.js"

    def python_problem(self) -> str | None:
        if not (self.python_dir / _COMPLETE).exists():
            return f"python proofs need the pytest toolchain in {self.python_dir}: {_HOW}"
        return None

    def javascript_problem(self) -> str | None:
        if self.node is None:
            return (
                f"javascript proofs need Node.js {MINIMUM_NODE}+ (Debian package nodejs), "
                "which is not on PATH"
            )
        if _major(self.node_version) < MINIMUM_NODE:
            return (
                f"javascript proofs need Node.js {MINIMUM_NODE}+ "
                f"(found {self.node_version or 'an unknown version'} at {self.node})"
            )
        if not (self.jest_dir / _COMPLETE).exists():
            return f"javascript proofs need the Jest toolchain in {self.jest_dir}: {_HOW}"
        return None

    def readonly_dirs(self) -> tuple[Path, ...]:
        """What a sandbox must see, read-only, beside /usr: the toolchain and the interpreters'
        installations when they live elsewhere."""
        dirs = [self.root.resolve()]
        base = _venv_home(self.python_dir)
        if base is not None:
            dirs.append(base.parent)
        if self.node is not None:
            dirs.append(self.node.resolve().parent.parent)
        usr = Path("/usr")
        return tuple(d for d in dict.fromkeys(dirs) if not d.is_relative_to(usr))


_HOW = "run warmpool toolchain (scripts/toolchain in a checkout)"


def locate(root: Path) -> Toolchain:
    root = root.absolute()
    node_path = shutil.which("node")
    node = Path(node_path) if node_path else None
    return Toolchain(
        root=root,
        python_dir=root / f"python-{_digest('python', _PYTHON_PINS)}",
        jest_dir=root / f"jest-{_digest('jest', _JEST_PINS)}",
        node=node,
        node_version=_node_version(node) if node else None,
    )


def install(root: Path, *, base_python: Path | None = None) -> Toolchain:
    """Install what is missing; safe when several processes install at once."""
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        toolchain = locate(root)
        if toolchain.python_problem():
            _install_python(toolchain.python_dir, base_python or _shared_python())
        if not (toolchain.jest_dir / _COMPLETE).exists():
            _install_jest(toolchain.jest_dir)
    return locate(root)


def _install_python(target: Path, base: Path) -> None:
    _fresh(target, "python", _PYTHON_PINS)
    _run([str(base), "-m", "venv", "--without-pip", str(target)], target)
    # The server's pip installs into the new environment: the shared interpreter may have none.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(target / "bin" / "python"),
            "install",
            "--quiet",
            "--no-input",
            "--disable-pip-version-check",
            "--requirement",
            str(target / "requirements.txt"),
        ],
        target,
    )
    (target / _COMPLETE).touch()


def _install_jest(target: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ToolchainError("installing Jest needs npm (with Node.js), which is not on PATH")
    _fresh(target, "jest", _JEST_PINS)
    _run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"], target)
    (target / _COMPLETE).touch()


def _fresh(target: Path, tool: str, pins: tuple[str, ...]) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(mode=0o755)
    for name in pins:
        (target / name).write_bytes(_pinned(tool, name))


def _run(command: list[str], cwd: Path) -> None:
    # World-readable files: sandboxed runs read them under their own uids.
    done = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, umask=0o022, check=False
    )
    if done.returncode != 0:
        raise ToolchainError(
            f"{' '.join(command)} failed with status {done.returncode}:\n"
            f"{(done.stdout + done.stderr)[-4000:]}"
        )


def _shared_python() -> Path:
    """An interpreter that other uids may run: the server's own may sit in a private home."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        Path(sys.base_prefix) / "bin" / version,
        Path("/usr/bin") / version,
        Path("/usr/local/bin") / version,
        Path("/usr/bin/python3"),
    ]
    for candidate in candidates:
        if candidate.exists() and usable_by_others(candidate.resolve()):
            return candidate.resolve()
    raise ToolchainError(
        "python proofs need a Python interpreter that other users may run; none of "
        f"{', '.join(map(str, candidates))} is (a folder on the way is private); "
        "install Debian's python3 or pass base_python"
    )


def usable_by_others(path: Path) -> bool:
    """Whether a uid other than the owner may reach and run (or read) `path`."""
    for folder in [*reversed(path.parents)]:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & (stat.S_IROTH | stat.S_IXOTH))


def _digest(tool: str, pins: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in pins:
        digest.update(_pinned(tool, name))
    return digest.hexdigest()[:12]


def _pinned(tool: str, name: str) -> bytes:
    return resources.files("qa").joinpath("pinned", tool, name).read_bytes()


def pinned_requirement(tool: str, package: str) -> str:
    """`package==version` as pinned for `tool` (python: requirements.txt, jest: package.json)."""
    if tool == "jest":
        version = json.loads(_pinned("jest", "package.json"))["dependencies"][package]
        return f"{package}=={version}"
    for line in _pinned("python", "requirements.txt").decode().splitlines():
        if line.startswith(f"{package}=="):
            return line.strip()
    raise KeyError(f"{package} is not pinned for {tool}")


def _venv_home(venv: Path) -> Path | None:
    try:
        config = (venv / "pyvenv.cfg").read_text()
    except OSError:
        return None
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return Path(value.strip()).resolve()
    return None


def _node_version(node: Path) -> str | None:
    try:
        done = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def _major(version: str | None) -> int:
    digits = (version or "").lstrip("v").split(".")[0]
    return int(digits) if digits.isdigit() else 0


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else DEFAULT_ROOT
    try:
        toolchain = install(root)
    except ToolchainError as error:
        print(f"toolchain: {error}", file=sys.stderr)
        return 1
    for line in report(toolchain):
        print(line)
    return 0


def report(toolchain: Toolchain) -> list[str]:
    return [
        f"toolchain ready in {toolchain.root}",
        f"  python: {toolchain.python}",
        f"  jest:   {toolchain.jest} (node {toolchain.node_version or 'missing'})",
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
