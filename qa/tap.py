"""Reading TAP, the Test Anything Protocol, as pgTAP prints it: our own parser, so a count never
rests on a tool's exit status or wording (`pg_prove` on a folder exits 0 having run nothing;
psql exits 0 after `not ok`).

Only unindented lines count: a plan `1..N`, results `ok N - name` / `not ok N - name`
(with an optional `# SKIP` or `# TODO` directive) and `Bail out!`. Indented lines are a
subtest's own lines and `#` lines are diagnostics; both are kept as the details of the
result they belong to (a subtest comes before its summary line, a diagnostic after it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_RESULT = re.compile(
    r"^(?P<not>not )?ok\b\s*(?P<number>\d+)?\s*(?:-\s*)?(?P<description>.*?)"
    r"(?:\s+#\s*(?P<directive>SKIP|TODO)\b.*)?$",
    re.IGNORECASE,
)
_PLAN = re.compile(r"^1\.\.(?P<count>\d+)\b")
_BAIL_OUT = re.compile(r"^Bail out!\s*(?P<reason>.*)$")


@dataclass
class Result:
    ok: bool
    number: int | None
    description: str
    directive: str | None  # SKIP or TODO: neither a pass nor a failure
    details: list[str] = field(default_factory=list)


@dataclass
class Stream:
    plan: int | None = None
    results: list[Result] = field(default_factory=list)
    bailed_out: str | None = None

    def problem(self) -> str | None:
        """Why these results cannot be counted on, if they cannot."""
        if self.bailed_out is not None:
            return f"the tests bailed out: {self.bailed_out or 'no reason given'}"
        if self.plan is None:
            return "the TAP output has no plan (1..N): it may have stopped early"
        if self.plan != len(self.results):
            return f"the TAP plan announced {self.plan} tests but {len(self.results)} reported"
        numbers = [result.number for result in self.results]
        if any(n is not None and n != i for i, n in enumerate(numbers, start=1)):
            return "the TAP results are out of order"
        return None


def parse(lines: Iterable[str]) -> Stream:
    stream = Stream()
    subtest: list[str] = []
    for line in (part for text in lines for part in text.splitlines()):
        if not line.strip():
            continue
        if line[0].isspace():
            subtest.append(line.strip())
        elif line.startswith("#"):
            if stream.results:
                stream.results[-1].details.append(line)
        elif match := _PLAN.match(line):
            stream.plan = int(match["count"])
        elif match := _RESULT.match(line):
            directive = match["directive"]
            stream.results.append(
                Result(
                    ok=match["not"] is None,
                    number=int(match["number"]) if match["number"] else None,
                    description=match["description"],
                    directive=directive.upper() if directive else None,
                    details=subtest,
                )
            )
            subtest = []
        elif match := _BAIL_OUT.match(line):
            stream.bailed_out = match["reason"]
    return stream
