"""Every operation of the published OpenAPI document, fuzzed with each role's key: no answer
is a 5xx, and every answer's status, content type and body are the ones the document names."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis

from server.auth import Role
from tests.fuzz.conftest import EXAMPLES, SEED
from tests.fuzz.fuzzer import fuzz

pytestmark = pytest.mark.slow


def test_every_answer_is_documented_and_none_is_a_server_error(
    api_schema: schemathesis.BaseSchema, role: Role, tmp_path: Path
) -> None:
    failures = fuzz(api_schema, role, examples=EXAMPLES, seed=SEED)
    assert not failures, "\n\n".join([*failures, f"The server's log is in {tmp_path}."])
