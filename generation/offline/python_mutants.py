"""Python mutants: one AST change inside the functions a catalog mission names as mutable.

A mutant is written back as a minimal text patch (only the changed expression, or the dropped
`if` statement, is re-rendered with `ast.unparse`), so the rest of the file keeps its
formatting and comments. A patch that does not parse back to exactly the mutated tree is
dropped rather than shipped.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from generation.offline.mutation import Mutation

_BOUNDARY = "a value exactly on the boundary is judged the other way"
_INVERTED = "the test gives the opposite answer"
_COMPARISON_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], str]] = {
    ast.Lt: (ast.LtE, _BOUNDARY),
    ast.LtE: (ast.Lt, _BOUNDARY),
    ast.Gt: (ast.GtE, _BOUNDARY),
    ast.GtE: (ast.Gt, _BOUNDARY),
    ast.Eq: (ast.NotEq, _INVERTED),
    ast.NotEq: (ast.Eq, _INVERTED),
    ast.In: (ast.NotIn, _INVERTED),
    ast.NotIn: (ast.In, _INVERTED),
    ast.Is: (ast.IsNot, _INVERTED),
    ast.IsNot: (ast.Is, _INVERTED),
}
_ARITHMETIC_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
}
_EXTREMES = {"min": "max", "max": "min"}


# A node the patch can locate in the source: expressions and statements carry positions.
Located = ast.expr | ast.stmt
Replacement = ast.AST | list[ast.stmt]


@dataclass(frozen=True)
class _Edit:
    # Given a copy of the node, returns what replaces it in the mutated tree.
    replace: Callable[[ast.AST], Replacement]
    effect: str


def mutants(path: str, source: str, functions: Sequence[str]) -> list[Mutation]:
    """Every mutant of the named functions (`name` or `Class.method`) of one module."""
    tree = ast.parse(source)
    defined = _functions(tree)
    missing = [name for name in functions if name not in defined]
    if missing:
        raise ValueError(f"{path} defines no function named {', '.join(missing)}")
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    positions = {id(node): index for index, node in enumerate(ast.walk(tree))}
    found = []
    for name in functions:
        for node in _nodes(defined[name].body):
            for edit in _edits(node, parents[id(node)], source):
                mutation = _apply(path, source, positions[id(node)], edit)
                if mutation is not None:
                    found.append(mutation)
    return found


def functions(source: str) -> list[str]:
    """Every function and method a module defines, as `mutants` names them."""
    return list(_functions(ast.parse(source)))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[f"{node.name}.{member.name}"] = member
    return found


def _nodes(body: list[ast.stmt]) -> Iterator[Located]:
    # Type annotations change no behaviour, and f-string internals are skipped because before
    # Python 3.12 their positions are unreliable.
    pending: list[ast.AST] = list(reversed(body))
    while pending:
        node = pending.pop()
        if isinstance(node, Located):
            yield node
        if not isinstance(node, ast.JoinedStr):
            children = [
                child
                for field, value in ast.iter_fields(node)
                if field not in ("annotation", "returns")
                for child in (value if isinstance(value, list) else [value])
                if isinstance(child, ast.AST)
            ]
            pending.extend(reversed(children))


def _edits(node: Located, parent: ast.AST, source: str) -> Iterator[_Edit]:
    if isinstance(node, ast.stmt):
        yield from _statement_edits(node, source)
    else:
        yield from _operator_edits(node)
        yield from _value_edits(node, parent)


def _operator_edits(node: ast.expr) -> Iterator[_Edit]:
    match node:
        case ast.Compare(ops=ops):
            for index, op in enumerate(ops):
                if type(op) in _COMPARISON_SWAPS:
                    swapped, effect = _COMPARISON_SWAPS[type(op)]
                    yield _Edit(_compare_op(index, swapped), effect)
        case ast.BoolOp(op=ast.And()):
            yield _Edit(_with(op=ast.Or()), "one of the conditions alone is now enough")
        case ast.BoolOp(op=ast.Or()):
            yield _Edit(_with(op=ast.And()), "all of the conditions are now required")
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            yield _Edit(lambda _: copy.deepcopy(operand), "the condition is inverted")
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _ARITHMETIC_SWAPS:
            if not _is_text(left) and not _is_text(right):
                yield _Edit(_with(op=_ARITHMETIC_SWAPS[type(op)]()), "the arithmetic is wrong")


def _value_edits(node: ast.expr, parent: ast.AST) -> Iterator[_Edit]:
    match node:
        case ast.Constant(value=bool(flag)):
            yield _Edit(lambda _: ast.Constant(not flag), "the flag says the opposite")
        case ast.Constant(value=int(number)) if not isinstance(parent, ast.UnaryOp):
            changed = number - 1 if number > 0 else number + 1
            yield _Edit(lambda _: ast.Constant(changed), "a bound or amount is off by one")
        case ast.Call(func=ast.Name(id="range"), args=[*_, stop]) if not isinstance(
            stop, ast.Constant
        ):
            yield _range_stop_edit(len(node.args) - 1, stop)
        case ast.Call(func=ast.Name(id=name)) if name in _EXTREMES:
            yield _Edit(
                _with(func=ast.Name(_EXTREMES[name], ast.Load())), "the other extreme is taken"
            )
        case ast.Subscript(slice=ast.Name() as index, ctx=ast.Load()):
            yield _Edit(
                _with(slice=ast.BinOp(index, ast.Add(), ast.Constant(1))),
                "the neighbouring element is read",
            )


def _statement_edits(node: ast.stmt, source: str) -> Iterator[_Edit]:
    match node:
        case ast.AugAssign(op=op, value=value) if type(op) in _ARITHMETIC_SWAPS:
            if not _is_text(value):
                yield _Edit(_with(op=_ARITHMETIC_SWAPS[type(op)]()), "the arithmetic is wrong")
        case ast.Return(value=ast.Compare() | ast.BoolOp() as value):
            yield _Edit(
                _with(value=ast.UnaryOp(ast.Not(), value)), "the function answers the opposite"
            )
        case ast.If(orelse=orelse) if _starts_with(source, node, "if"):
            yield _Edit(lambda _: copy.deepcopy(orelse), "that case is no longer handled")


def _compare_op(index: int, op: type[ast.cmpop]) -> Callable[[ast.AST], Replacement]:
    def replace(node: ast.AST) -> Replacement:
        assert isinstance(node, ast.Compare)
        node.ops[index] = op()
        return node

    return replace


def _with(**fields: object) -> Callable[[ast.AST], Replacement]:
    def replace(node: ast.AST) -> Replacement:
        for name, value in fields.items():
            setattr(node, name, copy.deepcopy(value))
        return node

    return replace


def _range_stop_edit(index: int, stop: ast.expr) -> _Edit:
    # `range(n + 1)` loses its `+ 1`, `range(n - 1)` its `- 1`, and `range(n)` becomes
    # `range(n - 1)`: the classic off-by-one of a loop bound.
    match stop:
        case ast.BinOp(left=left, op=ast.Add(), right=ast.Constant(value=1)):
            changed, effect = left, "the loop stops one step early"
        case ast.BinOp(left=left, op=ast.Sub(), right=ast.Constant(value=1)):
            changed, effect = left, "the loop runs one step too far"
        case _:
            changed = ast.BinOp(stop, ast.Sub(), ast.Constant(1))
            effect = "the loop stops one step early"

    def replace(node: ast.AST) -> Replacement:
        assert isinstance(node, ast.Call)
        node.args[index] = copy.deepcopy(changed)
        return node

    return _Edit(replace, effect)


def _is_text(operand: ast.expr) -> bool:
    # A `+` that joins text is no arithmetic: `'a' - b` is not a bug anyone would write.
    match operand:
        case ast.JoinedStr() | ast.Constant(value=str()):
            return True
        case ast.BinOp(left=left, op=ast.Add(), right=right):
            return _is_text(left) or _is_text(right)
    return False


def _starts_with(source: str, node: ast.stmt, keyword: str) -> bool:
    # An `elif` is an If node too; dropping one would need the chain rewritten.
    line = source.splitlines()[node.lineno - 1]
    return _char_column(line, node.col_offset) == len(line) - len(line.lstrip()) and (
        line.lstrip().startswith(keyword + " ")
    )


def _apply(path: str, source: str, position: int, edit: _Edit) -> Mutation | None:
    tree = ast.parse(source)
    node = list(ast.walk(tree))[position]
    assert isinstance(node, Located)
    replacement = edit.replace(copy.deepcopy(node))
    _substitute(tree, node, replacement)
    expected = ast.dump(tree)
    lines = source.splitlines(keepends=True)
    before = lines[node.lineno - 1].strip()
    if isinstance(replacement, list):
        # Removing the statement may leave its block empty, which needs a `pass`.
        empty_block: list[ast.stmt] = [ast.Pass()]
        renderings = [_replace_statement(lines, node, body) for body in (replacement, empty_block)]
    else:
        text = ast.unparse(replacement)
        # Parentheses are added only where precedence would otherwise change the meaning.
        renderings = [_replace_span(lines, node, after) for after in (text, f"({text})")]
    for patched in renderings:
        if _parses_to(patched, expected):
            after = "" if isinstance(replacement, list) else patched.splitlines()[node.lineno - 1]
            return Mutation(path, node.lineno, before, after.strip(), edit.effect, patched)
    return None


def _substitute(tree: ast.AST, old: ast.AST, new: Replacement) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                index = next(i for i, item in enumerate(value) if item is old)
                spliced = value[:index] + (new if isinstance(new, list) else [new])
                spliced += value[index + 1 :]
                setattr(parent, field, spliced or [ast.Pass()])
                return
    raise AssertionError("the mutated node is not in its tree")


def _parses_to(source: str, expected: str) -> bool:
    try:
        return ast.dump(ast.parse(source)) == expected
    except SyntaxError:
        return False


def _char_column(line: str, byte_offset: int) -> int:
    # The ast reports columns in UTF-8 bytes.
    return len(line.encode()[:byte_offset].decode())


def _bounds(lines: list[str], node: Located) -> tuple[int, int]:
    assert node.end_lineno is not None
    assert node.end_col_offset is not None
    start = sum(len(line) for line in lines[: node.lineno - 1])
    start += _char_column(lines[node.lineno - 1], node.col_offset)
    end = sum(len(line) for line in lines[: node.end_lineno - 1])
    end += _char_column(lines[node.end_lineno - 1], node.end_col_offset)
    return start, end


def _replace_span(lines: list[str], node: Located, text: str) -> str:
    start, end = _bounds(lines, node)
    source = "".join(lines)
    return source[:start] + text + source[end:]


def _replace_statement(lines: list[str], node: Located, statements: list[ast.stmt]) -> str:
    assert node.end_lineno is not None
    first = lines[node.lineno - 1]
    indent = first[: len(first) - len(first.lstrip())]
    rendered = "".join(
        f"{indent}{line}\n"
        for statement in statements
        for line in ast.unparse(statement).splitlines()
    )
    return "".join(lines[: node.lineno - 1]) + rendered + "".join(lines[node.end_lineno :])
