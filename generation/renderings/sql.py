"""Renaming SQL identifiers (tables, views, functions, columns, parameters, aliases) through
their tokens.

Names fold to lower case, as PostgreSQL folds them; a quoted identifier that spells a folded
name (`"plan"`) is that name and is renamed inside its quotes, any other (`"Plan"`) is a
different name and stays. Dollar-quoted bodies are code and renamed like the rest; so is a
quoted string that holds a statement (`'SELECT * FROM reorder_list'`, as pgTAP takes them);
other strings stay, and comments but for names they quote in backticks. Kept are
PostgreSQL's keywords, functions (pgTAP's too), types, catalogue relations and schemas
(`reserved/sql.txt`), the catalogue's column names in a mission that reads the catalogue,
what pgTAP's `runtests` finds by name (`test*`, `setup*`, `teardown*`, `startup*`,
`shutdown*`), and any name written as a string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, lru_cache
from importlib.resources import files
from typing import Literal, NamedTuple

from generation.renderings.scan import RenderingFailed, Scan, SourceFile, renamed_prose

Kind = Literal["name", "quoted name", "string", "code string", "body", "other", "comment"]

_NAME = re.compile(r"[A-Za-z_][\w$]*")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_]\w*)?\$")
_OTHER = re.compile(r"\d[\w.]*|\$\d+|::|[^\s\w]")
_STATEMENT = re.compile(
    r"\s*(?:select|with|values|insert|update|delete|table|execute|call)\b", re.IGNORECASE
)
_NAMES_IN_STRING = re.compile(r"\s*[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s*")
_RUNTESTS_PREFIXES = ("test", "setup", "teardown", "startup", "shutdown")
_CREATED = frozenset(
    {"table", "view", "function", "procedure", "type", "sequence", "index", "trigger", "schema"}
)
_CREATE_MODIFIERS = frozenset(
    {"or", "replace", "temp", "temporary", "unlogged", "materialized", "recursive", "unique"}
)
_CONSTRAINTS = frozenset({"constraint", "primary", "unique", "check", "foreign", "exclude", "like"})
_PARAMETER_MODES = frozenset({"in", "out", "inout", "variadic"})


class Token(NamedTuple):
    kind: Kind
    text: str
    start: int
    end: int
    # What a quoted name, a code string or a body holds (unescaped).
    inner: str = ""


@cache
def _listed(name: str) -> frozenset[str]:
    text = (files("generation.renderings") / "reserved" / name).read_text()
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def fold(name: str) -> str:
    return name.lower()


def is_source(path: str) -> bool:
    return path.endswith(".sql")


def allowed(name: str) -> bool:
    return (
        _NAME.fullmatch(name) is not None
        and name == name.lower()
        and name not in _listed("sql.txt")
        and not name.startswith(_RUNTESTS_PREFIXES)
    )


def tokens(source: str) -> list[Token]:
    return lex(source)[0]


def lex(source: str) -> tuple[list[Token], list[Token]]:
    """The tokens and the comments."""
    found: list[Token] = []
    comments: list[Token] = []
    position = 0
    while position < len(source):
        start = position
        if source[position].isspace():
            position += 1
        elif source.startswith(("--", "/*"), position):
            if source.startswith("--", position):
                position = _after(source, "\n", position)
            else:
                position = _end_of_block_comment(source, position)
            comments.append(Token("comment", source[start:position], start, position))
        elif tag := _DOLLAR_TAG.match(source, position):
            close = source.find(tag.group(), tag.end())
            if close < 0:
                raise RenderingFailed(f"the body {tag.group()} is not closed")
            position = close + len(tag.group())
            found.append(
                Token("body", source[start:position], start, position, source[tag.end() : close])
            )
        elif source[position] in "'\"" or (
            source[position] in "eE" and source.startswith("'", position + 1)
        ):
            found.append(_quoted(source, position))
            position = found[-1].end
        elif name := _NAME.match(source, position):
            position = name.end()
            found.append(Token("name", name.group(), start, position))
        else:
            other = _OTHER.match(source, position)
            position = other.end() if other else position + 1
            found.append(Token("other", source[start:position], start, position))
    return found, comments


@lru_cache(maxsize=1024)  # a mission's files (and their bodies) are rendered many times over
def _lexed(source: str) -> tuple[Token, ...]:
    """Tokens and comments, in order."""
    code, comments = lex(source)
    return tuple(sorted([*code, *comments], key=lambda token: token.start))


def _quoted(source: str, start: int) -> Token:
    escaped = source[start] in "eE"
    quote = source[start + escaped]
    position = start + escaped + 1
    while True:
        if position >= len(source):
            raise RenderingFailed(f"a {quote} quote is not closed")
        if (escaped and source[position] == "\\") or source.startswith(quote * 2, position):
            position += 2
        elif source[position] == quote:
            break
        else:
            position += 1
    raw = source[start + escaped + 1 : position]
    inner = raw.replace(quote * 2, quote)
    if quote == '"':
        kind: Kind = "quoted name"
    else:
        kind = "code string" if not escaped and _STATEMENT.match(inner) else "string"
    return Token(kind, source[start : position + 1], start, position + 1, inner)


def _after(source: str, terminator: str, position: int) -> int:
    found = source.find(terminator, position)
    return len(source) if found < 0 else found + len(terminator)


def _end_of_block_comment(source: str, position: int) -> int:
    depth = 0  # PostgreSQL's block comments nest
    while position < len(source):
        if source.startswith("/*", position):
            depth, position = depth + 1, position + 2
        elif source.startswith("*/", position):
            depth, position = depth - 1, position + 2
            if depth == 0:
                return position
        else:
            position += 1
    return position


def _flat(source: str) -> Iterator[Token]:
    """Every token, those inside bodies and code strings too, in order."""
    for token in tokens(source):
        if token.kind in ("body", "code string"):
            yield from _flat(token.inner)
        else:
            yield token


def _name_of(token: Token) -> str | None:
    """The folded name a token stands for, if it names something."""
    if token.kind == "name":
        return token.text.lower()
    if token.kind == "quoted name" and _NAME.fullmatch(token.inner) and token.inner.islower():
        return token.inner
    return None


def scan(source_files: Sequence[SourceFile]) -> Scan:
    reserved = _listed("sql.txt")
    defined: set[str] = set()
    pinned: set[str] = set()
    taken: set[str] = set()
    seen_in_visible: set[str] = set()
    reads_catalogue = False
    for file in source_files:
        found = list(_flat(file.text))
        names = {name for token in found if (name := _name_of(token)) is not None}
        taken |= names
        for token in found:
            if token.kind == "quoted name":
                taken.add(token.inner.lower())
            elif token.kind == "string" and _NAMES_IN_STRING.fullmatch(token.inner):
                spelled = {word.lower() for word in _NAME.findall(token.inner)}
                pinned |= spelled
                taken |= spelled
        reads_catalogue = reads_catalogue or any(
            name.startswith("pg_") or name == "information_schema" for name in names
        )
        if file.visible:
            seen_in_visible |= names
        if file.defines:
            defined |= set(_defined(found, reserved))
    if reads_catalogue:
        pinned |= _listed("sql_catalog_columns.txt")
    renamable = {
        name for name in defined - pinned - reserved if name in seen_in_visible and allowed(name)
    }
    return Scan(renamable=frozenset(renamable), taken=frozenset(taken))


def _defined(found: list[Token], reserved: frozenset[str]) -> Iterator[str]:
    """Names the statements create: relations, functions, their columns and parameters,
    and aliases."""
    names = [_name_of(token) for token in found]
    for index, name in enumerate(names):
        following = names[index + 1] if index + 1 < len(names) else None
        fresh = following is not None and following not in reserved
        if name == "create":
            yield from _created(found, names, index + 1)
        elif name == "as" and following is not None and fresh:
            yield following
            if index + 2 < len(found) and found[index + 2].text == "(":
                yield from _elements(found, names, index + 2, first_only=False)
        elif name == "table" and index and names[index - 1] == "returns":
            yield from _elements(found, names, index + 1, first_only=True)
        elif (
            name is not None and following is not None and fresh and found[index + 1].kind == "name"
        ):
            yield following  # an alias: `FROM invoices i`


def _created(found: list[Token], names: list[str | None], index: int) -> Iterator[str]:
    while index < len(names) and names[index] in _CREATE_MODIFIERS:
        index += 1
    if index + 1 >= len(names) or names[index] not in _CREATED:
        return
    created, index = names[index], index + 1
    while index < len(names) and names[index] in ("if", "not", "exists"):
        index += 1
    name = names[index] if index < len(names) else None
    if name is not None:
        yield name
        if created in ("table", "function", "procedure") and index + 1 < len(found):
            yield from _elements(found, names, index + 1, first_only=True)


def _elements(
    found: list[Token], names: list[str | None], open_: int, *, first_only: bool
) -> Iterator[str]:
    """In a parenthesised list (columns, parameters), the name that starts each element; or
    with `first_only` false, every name in it."""
    if open_ >= len(found) or found[open_].text != "(":
        return
    depth, at_start = 0, False
    for index in range(open_, len(found)):
        text = found[index].text if found[index].kind == "other" else ""
        if text in ("(", ")"):
            depth += 1 if text == "(" else -1
            at_start = depth == 1 and text == "("
            if depth == 0:
                return
            continue
        if depth != 1:
            continue
        name = names[index]
        if text == ",":
            at_start = True
        elif not first_only:
            if name is not None:
                yield name
        elif at_start and name not in _PARAMETER_MODES:
            if name is not None and name not in _CONSTRAINTS and _has_type(found, index):
                yield name
            at_start = False


def _has_type(found: list[Token], index: int) -> bool:
    """A column or parameter has a name and then a type; a lone name is only a type."""
    return index + 1 < len(found) and found[index + 1].text not in (",", ")")


def rewrite(path: str, source: str, renames: Mapping[str, str]) -> str:
    folded = {old.lower(): new for old, new in renames.items()}
    return _rewritten(source, folded)


def _rewritten(source: str, renames: Mapping[str, str]) -> str:
    pieces, position = [], 0
    for token in _lexed(source):
        replacement = _replacement(token, renames)
        if replacement is not None:
            pieces += [source[position : token.start], replacement]
            position = token.end
    return "".join([*pieces, source[position:]])


def _replacement(token: Token, renames: Mapping[str, str]) -> str | None:
    name = _name_of(token)
    if name is not None and name in renames:
        return renames[name] if token.kind == "name" else f'"{renames[name]}"'
    if token.kind == "body":
        tag = token.text[: token.text.index("$", 1) + 1]
        return f"{tag}{_rewritten(token.inner, renames)}{tag}"
    if token.kind == "code string":
        return "'" + _rewritten(token.inner, renames).replace("'", "''") + "'"
    if token.kind == "comment":
        return renamed_prose(token.text, renames, fold)
    return None
