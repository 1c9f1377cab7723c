"""The README says what the code does: every module and named query its "Where it lives" table
names exists (and the module runs the query), and its settings table lists exactly the
settings the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from server.settings import VARIABLES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CODE = re.compile(r"`([^`]+)`")
# What a newcomer looks for first: each must have its row.
BEHAVIOURS = [
    "claim",
    "global cap",
    "sweeper",
    "serve",
    "retirement",
    "replenish forecast",
    "proof of a mission",
    "sandbox",
    "review transitions",
    "ledger",
    "budget",
]


def table(heading: str) -> list[list[str]]:
    """The rows of the first table after `heading`, each a list of its cells."""
    section = README[README.index(heading) :]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if not set(cells[0]) <= {"-", " "}:
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def test_every_module_and_query_of_the_where_it_lives_table_exists() -> None:
    rows = table("### Where it lives")
    described = " / ".join(behaviour for behaviour, _, _ in rows)
    assert [wanted for wanted in BEHAVIOURS if wanted not in described] == []
    for behaviour, module, named_queries in rows:
        [path] = CODE.findall(module)
        source = ROOT / path
        assert source.is_file(), f"{behaviour}: {path} does not exist"
        for query in CODE.findall(named_queries):
            assert f'queries["{query}"]' in source.read_text(), f"{path} runs no query {query}"


def test_the_settings_table_lists_exactly_the_settings_the_code_reads() -> None:
    listed = {
        variable
        for row in table("## Running it for real")
        for variable in CODE.findall(row[0])
        if variable.startswith(("WARMPOOL_", "OPENAI_"))
    }
    assert listed == set(VARIABLES)
