"""Schemathesis over every operation of the published OpenAPI document, with one role's key.

Each operation gets hypothesis-generated cases, both valid ones and ones that break the schema,
and every answer goes through the checks; a failing operation does not stop the others, so one
run reports every fault it finds.
"""

from __future__ import annotations

import traceback
from typing import Any

import hypothesis
import schemathesis
from hypothesis import strategies
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.errors import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from server.auth import Role
from tests.fuzz import tally

# An answer slower than this is a hang, which the fuzzer reports instead of waiting for.
REQUEST_TIMEOUT_SECONDS = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def fuzz(schema: schemathesis.BaseSchema, role: Role, *, examples: int, seed: int) -> list[str]:
    """Run every operation; the failures, one report per failing operation."""
    failures = []
    for methods in schema.values():
        for operation in methods.values():
            try:
                _fuzz_operation(operation, role, examples=examples, seed=seed)
            except (Exception, FailureGroup) as error:
                failures.append(f"{operation.label}:\n{_describe(error)}")
    return failures


def _fuzz_operation(
    operation: schemathesis.APIOperation[Any, Any, Any, Any],
    role: Role,
    *,
    examples: int,
    seed: int,
) -> None:
    cases = strategies.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )

    @hypothesis.seed(seed)
    @hypothesis.settings(
        max_examples=examples,
        database=None,
        deadline=None,
        print_blob=False,
        # Each case is an HTTP round trip to a real server and its database.
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
    @hypothesis.given(cases)
    def run(case: schemathesis.Case[Any]) -> None:
        response = case.call(timeout=REQUEST_TIMEOUT_SECONDS)
        tally.record(role, operation.label, response.status_code)
        case.validate_response(response, checks=CHECKS)

    run()


def _describe(error: BaseException) -> str:
    """What failed, on which case, and how to reproduce it: a check failure's message holds
    the answer and a curl command, and hypothesis notes the case on any error."""
    return "".join(traceback.format_exception_only(error))
