"""What the fuzzer ran: the cases per role and operation, and the statuses they were answered
with (a run answered only 401 or 404 tested little)."""

from __future__ import annotations

from collections import Counter

# (role, operation label, status code) -> answers
ANSWERS: Counter[tuple[str, str, int]] = Counter()
COLUMN = 15


def record(role: str, operation: str, status: int, answers: int = 1) -> None:
    ANSWERS[role, operation, status] += answers


def report() -> list[str]:
    """A table: per operation the cases of each role and the statuses of all; then totals."""
    if not ANSWERS:
        return []
    roles = sorted({role for role, _, _ in ANSWERS})
    operations = sorted({operation for _, operation, _ in ANSWERS})
    width = max(len(label) for label in [*operations, "all operations"])
    lines = [" " * width + "".join(f"{role:>{COLUMN}}" for role in roles) + "   statuses:cases"]
    for operation in operations:
        cases = "".join(f"{_cases(role, operation):>{COLUMN}}" for role in roles)
        lines.append(f"{operation:<{width}}{cases}   {_statuses(operation)}")
    totals = "".join(f"{_cases(role):>{COLUMN}}" for role in roles)
    lines.append(f"{'all operations':<{width}}{totals}")
    lines.append(f"fuzz cases run in all: {sum(ANSWERS.values())}")
    return lines


def _cases(role: str, operation: str | None = None) -> int:
    return sum(
        answers
        for (answered, label, _), answers in ANSWERS.items()
        if answered == role and operation in (None, label)
    )


def _statuses(operation: str) -> str:
    statuses: Counter[int] = Counter()
    for (_, label, status), answers in ANSWERS.items():
        if label == operation:
            statuses[status] += answers
    return " ".join(f"{status}:{statuses[status]}" for status in sorted(statuses))
