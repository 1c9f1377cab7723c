"""Renaming SQL: folded names, quoted identifiers, bodies and statements in strings."""

from __future__ import annotations

import textwrap

from generation.renderings import sql
from generation.renderings.scan import SourceFile

SCHEMA = """
    CREATE TABLE subscriptions (
        id         integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        customer   text NOT NULL,
        started_on date NOT NULL,
        ended_on   date CHECK (ended_on >= started_on)
    );
"""
FUNCTION = """
    -- customer counts per day
    CREATE FUNCTION active_customers(on_day date)
    RETURNS TABLE (customer text, days bigint)
    LANGUAGE sql STABLE AS $$
        SELECT s.customer, count(*)
        FROM subscriptions s
        WHERE s.started_on <= on_day AND (s.ended_on IS NULL OR s."ended_on" >= on_day)
        GROUP BY s.customer
    $$;
"""
TEST = """
    CREATE FUNCTION test_active() RETURNS SETOF text LANGUAGE plpgsql AS $test$
    BEGIN
        INSERT INTO Subscriptions (customer, started_on) VALUES ('ana', '2024-01-10');
        RETURN NEXT results_eq(
            'SELECT * FROM active_customers(''2024-03-01'')',
            $$VALUES ('ana'::text, 1::bigint)$$,
            'customer counts on 1 March'
        );
    END
    $test$;
"""


def renamable(*sources: str) -> set[str]:
    files = [
        SourceFile(f"{index}.sql", textwrap.dedent(text), defines=True, visible=True)
        for index, text in enumerate(sources)
    ]
    return set(sql.scan(files).renamable)


def rewritten(source: str, **renames: str) -> str:
    return sql.rewrite("code.sql", textwrap.dedent(source), renames)


def test_tables_columns_functions_parameters_and_aliases_are_renamable() -> None:
    found = renamable(SCHEMA, FUNCTION, TEST)
    assert {
        "subscriptions", "customer", "started_on", "ended_on", "active_customers", "on_day",
        "days", "s",
    } <= found  # fmt: skip
    # Keywords, types, functions (pgTAP's too), language names and what runtests finds.
    assert {"count", "results_eq", "integer", "sql", "test_active", "text"}.isdisjoint(found)


def test_bodies_and_statements_in_strings_are_renamed_and_other_strings_are_not() -> None:
    renamed = rewritten(TEST, subscriptions="memberships", active_customers="current_members")
    assert "INSERT INTO memberships (customer, started_on) VALUES ('ana', '2024-01-10');" in (
        renamed
    )  # `Subscriptions` folds to the same name
    assert "'SELECT * FROM current_members(''2024-03-01'')'" in renamed
    assert "'customer counts on 1 March'" in renamed
    assert "$test$;" in renamed


def test_quoted_identifiers_that_spell_a_folded_name_are_renamed_in_their_quotes() -> None:
    renamed = rewritten(FUNCTION, ended_on="finished_on", customer="client")
    assert 's.finished_on IS NULL OR s."finished_on" >= on_day' in renamed
    assert "-- customer counts per day" in renamed
    assert "SELECT s.client, count(*)" in renamed
    other = rewritten('SELECT "Customer", customer FROM t', customer="client")
    assert other == 'SELECT "Customer", client FROM t'


def test_names_spelled_in_strings_are_pinned() -> None:
    found = renamable(
        """
        CREATE TABLE revenue (month date, amount integer, period text);
        SELECT date_trunc('month', r.month), 'period' FROM revenue r;
        """
    )
    assert {"month", "period"}.isdisjoint(found)
    assert {"revenue", "amount", "r"} <= found


def test_a_mission_that_reads_the_catalogue_keeps_the_catalogues_column_names() -> None:
    schema = "CREATE TABLE jobs (relname text, attempts integer);"
    assert "relname" in renamable(schema)
    assert "relname" not in renamable(schema, "SELECT relname FROM pg_class;")


def test_escaped_quotes_in_a_statement_string_survive_renaming() -> None:
    renamed = rewritten(
        "SELECT is((SELECT note FROM notes WHERE note = 'it''s'), 'x', 'it''s');",
        notes="remarks",
        note="remark",
    )
    assert renamed == (
        "SELECT is((SELECT remark FROM remarks WHERE remark = 'it''s'), 'x', 'it''s');"
    )
    in_string = rewritten("SELECT ok('SELECT 1 FROM notes WHERE n = ''it''''s''');", notes="r")
    assert in_string == "SELECT ok('SELECT 1 FROM r WHERE n = ''it''''s''');"


def test_comments_change_only_in_their_code_spans() -> None:
    source = "-- `on_hand` is the stock on hand\nSELECT on_hand /* `on_hand` */ FROM stock;\n"
    assert rewritten(source, on_hand="at_hand") == (
        "-- `at_hand` is the stock on hand\nSELECT at_hand /* `at_hand` */ FROM stock;\n"
    )
