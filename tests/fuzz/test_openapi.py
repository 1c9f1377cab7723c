"""Every operation of the published OpenAPI document, fuzzed with each role's key through every
phase and check of `schemathesis run --checks all`: the document says what the server does, and
the server does what the document says."""

from __future__ import annotations

import pytest
import schemathesis

from server.auth import Role
from tests.fuzz.conftest import Target
from tests.fuzz.fuzzer import fuzz

# A role's run is some 30 s on a quiet machine; several times that on a busy one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_every_phase_and_check_of_schemathesis_passes(
    api_schema: schemathesis.BaseSchema, role: Role, target: Target
) -> None:
    failures = fuzz(api_schema, role)
    assert not failures, "\n\n".join([*failures, f"The server's log is in {target.log_dir}."])
