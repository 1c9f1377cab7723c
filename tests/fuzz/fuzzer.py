"""Schemathesis's engine over the published OpenAPI document with one role's key: what
`schemathesis run --checks all` runs, in this process.

Its phases, in order: coverage (boundary values of every parameter and field, a missing required
header, a method the path does not declare, no key), fuzzing (hypothesis-generated cases, valid
and not), stateful (chains through the links it infers between operations, such as a created
job's id into GET and DELETE). Every check judges every answer: no 5xx; the documented status,
content type, headers and body; a valid request accepted and an invalid one refused; `Allow` on
OPTIONS and 405; auth not ignored; nothing used after it was deleted. A failure does not stop
the run, so one run reports every fault it finds.
"""

from __future__ import annotations

import schemathesis
from schemathesis.engine import events, from_schema
from schemathesis.engine.recorder import ScenarioRecorder

from server.auth import Role
from tests.fuzz import tally


def fuzz(schema: schemathesis.BaseSchema, role: Role) -> list[str]:
    """Run every phase; the failures, each once, with the curl command that repeats it."""
    failures: dict[tuple[str, str], str] = {}
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            _record(role, event.recorder)
            failures.update(_check_failures(event.recorder))
        elif isinstance(event, events.NonFatalError):
            failures[event.label, type(event.value).__name__] = f"{event.label}: {event.value!r}"
        elif isinstance(event, events.FatalError):
            failures["run", "fatal"] = f"the run stopped: {event.exception!r}"
        elif isinstance(event, events.EngineFinished):
            for failure in event.failures:
                failures["run", failure.title] = f"{failure.title}\n{failure.message}"
    return list(failures.values())


def _record(role: Role, recorder: ScenarioRecorder) -> None:
    for case_id, interaction in recorder.interactions.items():
        if interaction.response is not None:
            operation = recorder.cases[case_id].value.operation.label
            tally.record(role, operation, interaction.response.status_code)


def _check_failures(recorder: ScenarioRecorder) -> dict[tuple[str, str], str]:
    found = {}
    for case_id, checks in recorder.checks.items():
        operation = recorder.cases[case_id].value.operation.label
        for check in checks:
            if check.failure_info is not None:
                failure = check.failure_info.failure
                found[operation, failure.title] = (
                    f"{operation}: {failure.title}\n{failure.message}\n"
                    f"Reproduce with:\n    {check.failure_info.code_sample}"
                )
    return found
