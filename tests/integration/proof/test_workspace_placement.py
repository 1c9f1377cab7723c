"""A proof does not depend on where its workspace lives: under a project with its own pytest
configuration (warmpool's data folder sits in warmpool's checkout), python proofs still run
only the mission's own tests with pytest's defaults."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from qa.proof import Prover
from qa.results import Trust
from tests.support import proving
from tests.support.proof_samples import PYTHON


@pytest.fixture
def project() -> Iterator[Path]:
    """A project folder with a pytest configuration that no proof may pick up."""
    folder = Path(tempfile.mkdtemp(prefix="warmpool-project-"))
    folder.chmod(0o755)  # under /tmp, not pytest's private tmp_path: sandbox uids pass through
    (folder / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--no-such-option"\n'
    )
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("trust", ["trusted", "untrusted"])
async def test_a_proof_under_a_folder_with_pytest_configuration(
    project: Path, toolchain_root: Path, trust: Trust
) -> None:
    async with await Prover.start(
        work_root=project / ".warmpool" / "proofs",
        toolchain_root=toolchain_root,
        postgres_admin_url=None,
        slots=1,
    ) as prover:
        proving.require(prover, "python", trust)
        run = await prover.run("python", PYTHON.gold, PYTHON.tests, trust=trust)
    assert run.conclusive, run.reason
    assert run.passed == run.total == 3
