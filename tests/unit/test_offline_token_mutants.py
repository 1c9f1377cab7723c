"""The JavaScript and SQL mutators: one token changed, in the named functions or views only,
never inside a string, a comment or a regular expression."""

from __future__ import annotations

import pytest

from generation.offline.token_mutants import javascript_mutants, sql_mutants


def js_afters(body: str) -> set[str]:
    source = f"function target(a, b, xs) {{\n  {body}\n}}\n"
    return {mutation.after for mutation in javascript_mutants("m.js", source, ["target"])}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("return a < b;", "return a <= b;"),
        ("return a >= b;", "return a > b;"),
        ("return a === b;", "return a !== b;"),
        ("return a != b;", "return a == b;"),
        ("return a && b;", "return a || b;"),
        ("return a || b;", "return a && b;"),
        ("return !a;", "return a;"),
        ("return a + 1;", "return a - 1;"),
        ("return a + 1;", "return a + 0;"),
        ("return a * b;", "return a / b;"),
        ("a += b;", "a -= b;"),
        ("return Math.min(a, b);", "return Math.max(a, b);"),
        ("return true;", "return false;"),
        ("return xs[0];", "return xs[1];"),
    ],
)
def test_each_javascript_swap_is_applied(body: str, expected: str) -> None:
    assert expected in js_afters(body)


def test_javascript_text_is_never_code() -> None:
    body = (
        "const s = 'a < b' + \"c && d\" + `e === ${a}`; // f || g\n"
        "  /* h >= i */ const r = /x<y|[/]z/g;\n"
        "  return r.test(s);"
    )
    assert js_afters(body) == set()


def test_javascript_signs_and_string_joins_are_not_arithmetic() -> None:
    assert js_afters("return -a;") == set()
    assert js_afters("return 'total: ' + a;") == set()
    assert "return a / b / 2;" in js_afters("return a / b * 2;")


def test_javascript_mutates_only_the_named_functions_and_methods() -> None:
    source = (
        "const limit = 1 < 2;\n"
        "function other(a) { return a < 1; }\n"
        "class Cart {\n"
        "  total(items) { return items.length > 0; }\n"
        "}\n"
        "function target({ min = 0 }) { return min < 5; }\n"
    )
    methods = javascript_mutants("m.js", source, ["total"])
    assert {m.after for m in methods} == {
        "total(items) { return items.length >= 0; }",
        "total(items) { return items.length > 1; }",
    }
    assert {m.line for m in javascript_mutants("m.js", source, ["target"])} == {6}
    with pytest.raises(ValueError, match="defines no function named missing"):
        javascript_mutants("m.js", source, ["missing"])


SQL = """\
CREATE TABLE t (id integer, price numeric(10, 2), note text DEFAULT 'a < b');
-- report(): rows AND OR
CREATE FUNCTION report(as_of date) RETURNS SETOF t LANGUAGE sql AS $$
    SELECT * FROM t LEFT JOIN u ON u.id = t.id
    WHERE t.day <= as_of AND u.gone IS NULL AND t.note <> 'it''s < 3'
    ORDER BY t.day ASC, max(t.id) LIMIT 10
$$;
CREATE VIEW cheapest AS SELECT min(price) - 1 AS low FROM t WHERE note IS NOT NULL;
CREATE FUNCTION touch() RETURNS void LANGUAGE plpgsql AS $body$
BEGIN
    UPDATE t SET price = 1, note = 'x' WHERE id = 2;
END
$body$;
"""


def sql_afters(name: str) -> set[str]:
    return {mutation.after for mutation in sql_mutants("m.sql", SQL, [name])}


def test_each_sql_swap_is_applied_inside_a_function_body() -> None:
    assert sql_afters("report") == {
        "SELECT * FROM t INNER JOIN u ON u.id = t.id",
        "SELECT * FROM t LEFT JOIN u ON u.id <> t.id",
        "WHERE t.day < as_of AND u.gone IS NULL AND t.note <> 'it''s < 3'",
        "WHERE t.day <= as_of OR u.gone IS NULL AND t.note <> 'it''s < 3'",
        "WHERE t.day <= as_of AND u.gone IS NOT NULL AND t.note <> 'it''s < 3'",
        "WHERE t.day <= as_of AND u.gone IS NULL OR t.note <> 'it''s < 3'",
        "WHERE t.day <= as_of AND u.gone IS NULL AND t.note = 'it''s < 3'",
        "ORDER BY t.day DESC, max(t.id) LIMIT 10",
        "ORDER BY t.day ASC, min(t.id) LIMIT 10",
        "ORDER BY t.day ASC, max(t.id) LIMIT 9",
    }


def test_a_view_is_mutated_after_its_as_and_case_is_kept() -> None:
    assert sql_afters("cheapest") == {
        "CREATE VIEW cheapest AS SELECT max(price) - 1 AS low FROM t WHERE note IS NOT NULL;",
        "CREATE VIEW cheapest AS SELECT min(price) + 1 AS low FROM t WHERE note IS NOT NULL;",
        "CREATE VIEW cheapest AS SELECT min(price) - 0 AS low FROM t WHERE note IS NOT NULL;",
        "CREATE VIEW cheapest AS SELECT min(price) - 1 AS low FROM t WHERE note IS NULL;",
    }


def test_an_assignment_in_set_is_not_a_comparison() -> None:
    assert sql_afters("touch") == {
        "UPDATE t SET price = 0, note = 'x' WHERE id = 2;",
        "UPDATE t SET price = 1, note = 'x' WHERE id <> 2;",
        "UPDATE t SET price = 1, note = 'x' WHERE id = 1;",
    }


def test_every_sql_mutant_changes_one_token_and_nothing_outside_the_target() -> None:
    for mutation in sql_mutants("m.sql", SQL, ["report"]):
        changed = [
            number
            for number, (old, new) in enumerate(
                zip(SQL.splitlines(), mutation.content.splitlines(), strict=True), start=1
            )
            if old != new
        ]
        assert changed == [mutation.line]
        assert mutation.line in (4, 5, 6)
