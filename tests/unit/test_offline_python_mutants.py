"""The Python mutator: each operator is really applied, in the named functions only, as a
minimal patch that still parses."""

from __future__ import annotations

import ast
import textwrap

import pytest

from generation.offline.python_mutants import mutants


def module(body: str) -> str:
    return "def target(a, b, xs, i, n, done):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def afters(body: str) -> set[str]:
    return {mutation.after for mutation in mutants("m.py", module(body), ["target"])}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("return a < b", "return a <= b"),
        ("return a >= b", "return a > b"),
        ("return a == b", "return a != b"),
        ("return a in xs", "return a not in xs"),
        ("return a is None", "return a is not None"),
        ("return a and b", "return a or b"),
        ("return a or b", "return a and b"),
        ("return not done", "return done"),
        ("return a + b", "return a - b"),
        ("return a * b", "return a / b"),
        ("a += b", "a -= b"),
        ("return xs[0]", "return xs[1]"),
        ("return n - 3", "return n - 2"),
        ("return xs[i]", "return xs[i + 1]"),
        ("return [x for x in range(len(xs))]", "return [x for x in range(len(xs) - 1)]"),
        ("return list(range(1, n + 1))", "return list(range(1, n))"),
        ("return max(a, b)", "return min(a, b)"),
        ("done = True", "done = False"),
    ],
)
def test_each_operator_is_applied(body: str, expected: str) -> None:
    assert expected in afters(body)


def test_a_predicate_returned_is_negated() -> None:
    assert "return not a < b" in afters("return a < b")


def test_a_dropped_branch_keeps_its_else_and_an_emptied_block_gets_a_pass() -> None:
    source = module(
        """\
        if done:
            a = 1
        else:
            a = 2
        for x in xs:
            if x:
                b = x
        return a
        """
    )
    dropped = [m for m in mutants("m.py", source, ["target"]) if not m.after]
    assert [m.before for m in dropped] == ["if done:", "if x:"]
    assert "    a = 2\n    for x in xs:" in dropped[0].content
    assert "if done" not in dropped[0].content
    assert "for x in xs:\n        pass\n    return a" in dropped[1].content
    assert all("was removed" in m.describe() for m in dropped)


def test_an_elif_is_not_dropped_on_its_own() -> None:
    source = module("if a:\n    return 1\nelif b:\n    return 2\nreturn 3\n")
    assert [m.before for m in mutants("m.py", source, ["target"]) if not m.after] == ["if a:"]


def test_the_rest_of_the_file_keeps_its_formatting_and_comments() -> None:
    source = (
        '"""Docs."""\n\n'
        "LIMIT = 10  # a module constant, outside the function\n\n\n"
        "def target(items:   list[int]) -> int:\n"
        "    # Sum what is under the limit.\n"
        "    total = 0\n"
        "    for item in items:\n"
        "        if item   <   LIMIT:   # odd spacing stays\n"
        "            total += item\n"
        "    return total\n\n\n"
        "def other(x):\n"
        "    return x < 1\n"
    )
    found = mutants("m.py", source, ["target"])
    assert len(found) == 4
    for mutation in found:
        assert "def other(x):\n    return x < 1\n" in mutation.content
        assert "LIMIT = 10  # a module constant" in mutation.content
        assert "def target(items:   list[int]) -> int:\n    # Sum what" in mutation.content
        ast.parse(mutation.content)
        if mutation.after:
            changed = [
                (old.strip(), new.strip())
                for old, new in zip(source.splitlines(), mutation.content.splitlines(), strict=True)
                if old != new
            ]
            assert changed == [(mutation.before, mutation.after)]
    comparison = next(m for m in found if "<=" in m.after)
    assert comparison.after == "if item <= LIMIT:   # odd spacing stays"
    assert comparison.line == 10


def test_precedence_is_kept_with_parentheses_where_needed() -> None:
    assert "return (a - b) * n" in afters("return (a + b) * n")
    assert "return a / b + n" in afters("return a * b + n")


def test_annotations_text_and_methods_by_qualified_name() -> None:
    source = (
        "class Box:\n"
        "    def put(self, x: list[int]) -> str:\n"
        "        label: dict[str, int] = {}\n"
        "        return f'{x[0]}' + 'a' + str(label)\n"
    )
    assert mutants("m.py", source, ["Box.put"]) == []


def test_an_unknown_function_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"m\.py defines no function named nope"):
        mutants("m.py", module("return a"), ["nope"])
