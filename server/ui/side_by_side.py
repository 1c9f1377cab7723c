"""Gold and sabotaged code side by side, aligned line by line, the changed lines marked: the same
comparison as the mission's unified diff (difflib), laid out for reading."""

from __future__ import annotations

import difflib
from itertools import zip_longest
from typing import NamedTuple


class Line(NamedTuple):
    number: int
    text: str


class Row(NamedTuple):
    gold: Line | None
    sabotaged: Line | None
    changed: bool


class FileComparison(NamedTuple):
    path: str
    rows: list[Row]


def compare(gold_files: dict[str, str], sabotaged_files: dict[str, str]) -> list[FileComparison]:
    """One comparison per file the sabotage changed, added or removed, by path."""
    return [
        FileComparison(path, rows(gold_files.get(path, ""), sabotaged_files.get(path, "")))
        for path in sorted(gold_files.keys() | sabotaged_files.keys())
        if gold_files.get(path) != sabotaged_files.get(path)
    ]


def rows(gold: str, sabotaged: str) -> list[Row]:
    left, right = gold.splitlines(), sabotaged.splitlines()
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    aligned: list[Row] = []
    for tag, left_start, left_end, right_start, right_end in matcher.get_opcodes():
        # A replaced block pairs its lines in order; the longer side runs on against blanks.
        for left_index, right_index in zip_longest(
            range(left_start, left_end), range(right_start, right_end)
        ):
            aligned.append(
                Row(
                    gold=_line(left, left_index),
                    sabotaged=_line(right, right_index),
                    changed=tag != "equal",
                )
            )
    return aligned


def _line(lines: list[str], index: int | None) -> Line | None:
    return None if index is None else Line(index + 1, lines[index])
