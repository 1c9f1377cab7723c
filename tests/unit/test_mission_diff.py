"""How a sabotage is shown: the unified diff per changed file, the side-by-side rows, and the
content hash that tells one mission from another."""

from __future__ import annotations

from qa.missions import content_hash, unified_diff
from server.ui.side_by_side import Line, Row, compare, rows

GOLD = "a\nb\nc\nd\n"


def test_only_changed_files_get_a_diff_and_added_or_removed_files_count() -> None:
    gold = {"same.py": "x\n", "changed.py": GOLD, "removed.py": "gone\n"}
    sabotaged = {"same.py": "x\n", "changed.py": "a\nB\nc\nd\n", "added.py": "new"}
    diffs = unified_diff(gold, sabotaged)
    assert list(diffs) == ["added.py", "changed.py", "removed.py"]
    assert diffs["changed.py"] == (
        "--- a/changed.py\n+++ b/changed.py\n@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n d\n"
    )
    assert diffs["added.py"].startswith("--- /dev/null\n+++ b/added.py\n")
    assert diffs["removed.py"].startswith("--- a/removed.py\n+++ /dev/null\n")


def test_rows_pair_replaced_lines_and_leave_blanks_beside_added_ones() -> None:
    assert rows(GOLD, "a\nB\nc\nd\n") == [
        Row(Line(1, "a"), Line(1, "a"), changed=False),
        Row(Line(2, "b"), Line(2, "B"), changed=True),
        Row(Line(3, "c"), Line(3, "c"), changed=False),
        Row(Line(4, "d"), Line(4, "d"), changed=False),
    ]
    added = rows("a\nd\n", "a\nb\nc\nd\n")
    assert [row.changed for row in added] == [False, True, True, False]
    assert [row.gold for row in added[1:3]] == [None, None]
    assert added[3] == Row(Line(2, "d"), Line(4, "d"), changed=False)
    removed = rows(GOLD, "a\nd\n")
    assert [(row.gold, row.sabotaged) for row in removed if row.changed] == [
        (Line(2, "b"), None),
        (Line(3, "c"), None),
    ]


def test_compare_lists_changed_files_by_path() -> None:
    compared = compare(
        {"b.py": "1\n", "a.py": "x\n", "same.py": "s\n"},
        {"b.py": "2\n", "a.py": "y\n", "same.py": "s\n"},
    )
    assert [file.path for file in compared] == ["a.py", "b.py"]


def test_the_content_hash_ignores_key_order_and_names_the_domain() -> None:
    first = content_hash("python-backend", {"a": "1", "b": "2"}, {"t": "x"}, {"a": "1", "b": "3"})
    reordered = content_hash(
        "python-backend", {"b": "2", "a": "1"}, {"t": "x"}, {"b": "3", "a": "1"}
    )
    assert first == reordered
    assert len(first) == 32
    assert content_hash("sql-data", {"a": "1", "b": "2"}, {"t": "x"}, {"a": "1", "b": "3"}) != first
    assert content_hash("python-backend", {"a": "1", "b": "2"}, {}, {"a": "1", "b": "3"}) != first
