"""Renaming Python identifiers through the AST: only names the mission itself defines, and of
those only the ones every use of which the renaming can follow.

A name is kept (pinned) wherever it might mean something the mission does not own: keywords,
builtins and dunder names; module names (files keep their names) and names imported from
other modules; attributes used on objects the mission did not define, and attributes of the
built-in types; keyword arguments to callables that are not the mission's own, or that take
them through `**kwargs`; what pytest finds by name (tests, fixtures and their parameters);
names in `match` patterns; and any name written as a string (`getattr`, parametrize, dictionary
keys, `__all__`), since a string may stand for it. Strings never change, comments and
docstrings only in their code spans. The edits go where the AST says the name is, so f-string
expressions are renamed too.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import importlib
import io
import keyword
import re
import sys
import tokenize
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import PurePosixPath

from generation.renderings.scan import RenderingFailed, Scan, SourceFile, code_span_words

_BUILTIN_TYPES = (
    object, type, int, float, complex, bool, str, bytes, bytearray, list, tuple, dict, set,
    frozenset, range, slice, memoryview, property, staticmethod, classmethod, BaseException,
)  # fmt: skip
# Modules whose import does something (opens a browser, prints, starts a program).
_NOT_IMPORTED = frozenset({"antigravity", "this", "idlelib", "turtle", "turtledemo", "tkinter"})
# What reads attribute names as data: renaming an attribute would change the data.
_REFLECTION = frozenset(
    {"asdict", "astuple", "fields", "vars", "__dict__", "_asdict", "_fields", "dumps", "__repr__"}
)
_BUILTIN_ATTRIBUTES = frozenset(name for kind in _BUILTIN_TYPES for name in dir(kind))
_RESERVED = frozenset({*keyword.kwlist, *keyword.softkwlist, *dir(builtins), "self", "cls"})
# A string that could name identifiers: "username", "cart, expected" (parametrize).
_NAMES_IN_STRING = re.compile(r"\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*|\s+[A-Za-z_]\w*)*\s*")
_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")
_DEFINITION = re.compile(rb"(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


def is_source(path: str) -> bool:
    return path.endswith(".py")


def fold(name: str) -> str:
    return name


def allowed(name: str) -> bool:
    """Whether a rendering may introduce `name`."""
    return (
        name.isidentifier()
        and name not in _RESERVED
        and not name.startswith(("__", "test", "Test"))
    )


def scan(files: Sequence[SourceFile]) -> Scan:
    """What may be renamed in these files, and which names are taken."""
    modules = {part for file in files for part in _module_parts(file.path)}
    facts = _Facts(modules)
    seen_in_visible: set[str] = set()
    for file in files:
        tree = _parse(file.path, file.text)
        facts.read(file.path, tree, defines=file.defines)
        if file.visible:
            seen_in_visible |= _names(tree)
    renamable = {
        name
        for name in facts.defined - facts.pinned_names()
        if name in seen_in_visible and allowed(name)
    }
    return Scan(renamable=frozenset(renamable), taken=frozenset(facts.every_name | modules))


def rewrite(path: str, source: str, renames: Mapping[str, str]) -> str:
    """`source` with every use of a renamed name renamed; strings as they were."""
    rendered = bytearray(source.encode())
    for offset, old in reversed(_located(path, source)):
        if old in renames:
            rendered[offset : offset + len(old.encode())] = renames[old].encode()
    result = rendered.decode()
    _parse(path, result)
    return result


@lru_cache(maxsize=256)  # a mission's files are rendered many times over
def _located(path: str, source: str) -> tuple[tuple[int, str], ...]:
    """(byte offset, name) of every identifier the syntax tree writes, in order."""
    text = source.encode()
    starts = [0]
    for text_line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(text_line))
    found: dict[int, str] = {}
    tree = _parse(path, source)
    for node in ast.walk(tree):
        for line, column, name in _occurrences(node, text, starts):
            offset = starts[line - 1] + column
            if text[offset : offset + len(name.encode())] != name.encode():
                raise RenderingFailed(f"{path}: {name!r} is not where the syntax tree puts it")
            found[offset] = name
    for offset, name in _prose_names(source, text, starts, tree):
        found.setdefault(offset, name)
    return tuple(sorted(found.items()))


def _prose_names(
    source: str, text: bytes, starts: list[int], tree: ast.Module
) -> Iterator[tuple[int, str]]:
    """(byte offset, name) of the names in backticks in comments and docstrings."""
    lines = source.splitlines(keepends=True)
    try:
        comments = [
            token
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError) as error:
        raise RenderingFailed(f"cannot read the comments: {error}") from None
    for token in comments:
        row, column = token.start
        base = starts[row - 1] + len(lines[row - 1][:column].encode())
        for offset, name in code_span_words(token.string):
            yield base + len(token.string[:offset].encode()), name
    for node in ast.walk(tree):
        docstring = _docstring(node)
        if docstring is not None:
            start = starts[docstring.lineno - 1] + docstring.col_offset
            line, column = _end(docstring)
            segment = text[start : starts[line - 1] + column].decode()
            for offset, name in code_span_words(segment):
                yield start + len(segment[:offset].encode()), name


def _docstring(node: ast.AST) -> ast.Constant | None:
    if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return first.value if isinstance(first.value.value, str) else None
    return None


def _occurrences(node: ast.AST, text: bytes, starts: list[int]) -> Iterator[tuple[int, int, str]]:
    """(line, byte column, name) of each identifier this node itself writes."""
    if isinstance(node, ast.Name):
        yield node.lineno, node.col_offset, node.id
    elif isinstance(node, ast.arg | ast.keyword):
        named = [node.arg] if node.arg is not None else []  # `**kwargs` in a call has none
        yield from ((node.lineno, node.col_offset, name) for name in named)
    elif isinstance(node, ast.Attribute):
        yield _ending(node, node.attr)
    elif isinstance(node, ast.alias):
        if "." not in node.name:
            yield node.lineno, node.col_offset, node.name
        if node.asname is not None:
            yield _ending(node, node.asname)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        offset = starts[node.lineno - 1] + node.col_offset
        found = _DEFINITION.match(text, offset)
        if found is None or found.group(1).decode() != node.name:
            raise RenderingFailed(f"line {node.lineno}: cannot find the name {node.name!r}")
        yield node.lineno, found.start(1) - starts[node.lineno - 1], node.name
    elif isinstance(node, ast.Global | ast.Nonlocal):
        end = starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)
        yield from _named_in_span(set(node.names), node, end, text, starts)
    elif isinstance(node, ast.ExceptHandler) and node.name is not None:
        # The clause's name comes before its body: search its first line only.
        first_line_end = starts[min(node.lineno, len(starts) - 1)]
        yield from _named_in_span({node.name}, node, first_line_end, text, starts)


def _ending(node: ast.Attribute | ast.alias, name: str) -> tuple[int, int, str]:
    """Where `name` is when it ends the node (`x.name`, `import x as name`)."""
    line, column = _end(node)
    return line, column - len(name.encode()), name


def _end(node: ast.expr | ast.alias) -> tuple[int, int]:
    if node.end_lineno is None or node.end_col_offset is None:
        raise RenderingFailed(f"line {node.lineno}: the syntax tree does not say where it ends")
    return node.end_lineno, node.end_col_offset


def _named_in_span(
    wanted: set[str], node: ast.stmt | ast.excepthandler, end: int, text: bytes, starts: list[int]
) -> Iterator[tuple[int, int, str]]:
    start = starts[node.lineno - 1] + node.col_offset
    for found in _IDENTIFIER.finditer(text, start, end):
        name = found.group().decode()
        if name in wanted:
            line = bisect.bisect_right(starts, found.start()) - 1
            yield line + 1, found.start() - starts[line], name


class _Facts:
    """What the files define and where their names may mean something else."""

    def __init__(self, modules: set[str]) -> None:
        self._modules = modules
        self.defined: set[str] = set()
        self.every_name: set[str] = set()
        self.pinned: set[str] = set(modules)
        self._attributes_defined: set[str] = set()  # class members, `self.name = ...`
        self._module_names: set[str] = set()
        self._attributes_used: set[str] = set()
        # Attributes of the standard library modules the mission imports, and of their classes.
        self._library_attributes: set[str] = set()
        # Callable name -> for each definition, its explicit parameters.
        self._parameters: defaultdict[str, list[frozenset[str]]] = defaultdict(list)
        self._keywords: list[tuple[str | None, str]] = []

    def read(self, path: str, tree: ast.Module, *, defines: bool) -> None:
        is_test = PurePosixPath(path).name.startswith(("test_", "conftest")) or path.endswith(
            "_test.py"
        )
        self.every_name |= _names(tree)
        self._module_names |= _members(tree.body)  # attributes too: `import cart; cart.total`
        for node in ast.walk(tree):
            self._read_node(node, is_test=is_test, defines=defines)

    def _read_node(self, node: ast.AST, *, is_test: bool, defines: bool) -> None:
        if defines and (name := _store_name(node)) is not None:
            self.defined.add(name)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _NAMES_IN_STRING.fullmatch(node.value):
                self.pinned.update(re.findall(r"[A-Za-z_]\w*", node.value))
        elif isinstance(node, ast.Attribute):
            self._attributes_used.add(node.attr)
            if isinstance(node.ctx, ast.Store | ast.Del):
                self._attributes_defined.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            self._read_class(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._read_function(node, is_test=is_test)
        elif isinstance(node, ast.Call):
            callee = node.func
            target = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
            self._keywords.extend((target, word.arg) for word in node.keywords if word.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self._read_import(node)
        elif isinstance(node, ast.pattern):
            self.pinned.update(_pattern_names(node))

    def _read_function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, *, is_test: bool
    ) -> None:
        self._parameters[node.name].append(_explicit(node.args))
        collected = is_test and (
            node.name.startswith("test")
            or any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list)
        )
        if collected:  # pytest passes fixtures by these names
            self.pinned.add(node.name)
            self.pinned.update(argument.arg for argument in _all_arguments(node.args))

    def _read_import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Module names stay; so do names taken from modules that are not the mission's."""
        external = isinstance(node, ast.Import) or (
            node.level == 0 and (node.module or "").split(".")[0] not in self._modules
        )
        for alias in node.names:
            if isinstance(node, ast.Import):
                self.pinned.add(alias.name.split(".")[0])
                self._library_attributes |= _library_attributes(alias.name)
            if external and alias.asname is None:
                self.pinned.add(alias.name)
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            self._library_attributes |= _library_attributes(node.module)

    def _read_class(self, node: ast.ClassDef) -> None:
        self._attributes_defined |= _members(node.body)
        initialiser = next(
            (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"),
            None,
        )
        if initialiser is not None:
            self._parameters[node.name].append(_explicit(initialiser.args))
        else:
            fields = {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            self._parameters[node.name].append(frozenset(fields))

    def pinned_names(self) -> set[str]:
        pinned = set(self.pinned)
        # `.name` on something the mission did not define, or an attribute of a built-in type.
        pinned |= self._attributes_used - self._attributes_defined - self._module_names
        known = _BUILTIN_ATTRIBUTES | self._library_attributes
        pinned |= (self._attributes_used | self._attributes_defined) & known
        for target, word in self._keywords:
            definitions = self._parameters.get(target or "", [])
            if not definitions or any(word not in explicit for explicit in definitions):
                pinned.add(word)
        if self.every_name & _REFLECTION:  # attribute names become data (`asdict`, `vars`)
            pinned |= self._attributes_defined
        return pinned


@cache
def _library_attributes(module_name: str) -> frozenset[str]:
    """The attributes of a standard library module and of its classes; none for other modules
    (only the standard library is imported: it runs no code of the mission's)."""
    if module_name.split(".", maxsplit=1)[0] not in sys.stdlib_module_names - _NOT_IMPORTED:
        return frozenset()
    try:
        module = importlib.import_module(module_name)
    except Exception:  # a module this platform lacks: nothing to learn from it
        return frozenset()
    names = set(dir(module))
    for value in vars(module).values():
        if isinstance(value, type):
            names.update(dir(value))
    return frozenset(names)


def _store_name(node: ast.AST) -> str | None:
    """The name a node defines, if it defines one."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return node.id
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
        return node.attr
    if isinstance(node, ast.alias):
        return node.asname
    if isinstance(node, ast.ExceptHandler):
        return node.name
    return None


def _members(body: list[ast.stmt]) -> set[str]:
    """The names a module's or a class's own statements define."""
    return {
        name
        for statement in body
        for target in _targets(statement)
        if (name := _store_name(target)) is not None
    }


def _targets(statement: ast.stmt) -> list[ast.AST]:
    if isinstance(statement, ast.Assign):
        return [*statement.targets]
    if isinstance(statement, ast.AnnAssign | ast.AugAssign):
        return [statement.target]
    return [statement]


def _explicit(arguments: ast.arguments) -> frozenset[str]:
    return frozenset(argument.arg for argument in (*arguments.args, *arguments.kwonlyargs))


def _all_arguments(arguments: ast.arguments) -> list[ast.arg]:
    extra = [argument for argument in (arguments.vararg, arguments.kwarg) if argument]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _pattern_names(node: ast.pattern) -> set[str]:
    if isinstance(node, ast.MatchAs | ast.MatchStar):
        return {node.name} if node.name else set()
    if isinstance(node, ast.MatchMapping):
        return {node.rest} if node.rest else set()
    if isinstance(node, ast.MatchClass):
        return set(node.kwd_attrs)
    return set()


def _names(tree: ast.AST) -> set[str]:
    """Every identifier written in the tree."""
    found: set[str] = set()
    for node in ast.walk(tree):
        for field in ("id", "arg", "attr", "name", "asname", "module", "rest"):
            value = getattr(node, field, None)
            if isinstance(value, str):
                found.update(value.split("."))
        if isinstance(node, ast.Global | ast.Nonlocal):
            found.update(node.names)
    return found


def _module_parts(path: str) -> list[str]:
    """The module and package names a file's path gives (`shop/cart.py`: shop, cart)."""
    if not is_source(path):
        return []
    parts = PurePosixPath(path).with_suffix("").parts
    return [part for part in parts if part != "__init__"]


def _parse(path: str, source: str) -> ast.Module:
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as error:
        raise RenderingFailed(f"{path} does not parse: {error}") from None
