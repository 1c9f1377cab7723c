"""Renaming JavaScript identifiers through their tokens.

The lexer knows strings, template literals (whose `${...}` parts are code, renamed like the
rest, and whose text is not), regular expression literals and comments, so that only code is
touched, and comments only where they quote a name in backticks. Without a parser, what the
mission defines is read from where names are declared (`const`, `let`, `var`, `function`,
`class`, parameters, methods) and from the properties it writes (object literal keys,
shorthand properties, `x.name = ...`). A name is renamed everywhere it appears, properties and
shorthand included, or nowhere: it is kept when it is a keyword, a global, a property of a
built-in or of Jest (`reserved/javascript.txt`), bound from a package that is not the
mission's (`require('lodash')`), read as a property the mission never writes, or written as a
string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache, lru_cache
from importlib.resources import files
from pathlib import PurePosixPath
from typing import Literal, NamedTuple

from generation.renderings.scan import RenderingFailed, Scan, SourceFile, code_span_words

Kind = Literal["name", "string", "template", "regex", "number", "punctuation", "comment"]

# fmt: off
_KEYWORDS = frozenset({
    "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
    "do", "else", "export", "extends", "false", "finally", "for", "function", "if", "import",
    "in", "instanceof", "new", "null", "return", "super", "switch", "this", "throw", "true",
    "try", "typeof", "var", "void", "while", "with", "yield", "let", "static", "enum", "await",
    "implements", "package", "protected", "interface", "private", "public", "async", "of",
    "get", "set", "from", "as", "arguments", "eval", "undefined", "NaN", "Infinity",
})
_PUNCTUATION = (
    ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=", "=>", "==",
    "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=",
    "|=", "^=", "**", "<<", ">>",
)
# After these words a slash starts a regular expression; after any other word it divides.
_BEFORE_EXPRESSION = frozenset({
    "return", "typeof", "case", "in", "of", "new", "throw", "yield", "delete", "void",
    "instanceof", "else", "do", "await",
})
# fmt: on
_PUNCTUATOR = re.compile("|".join(map(re.escape, _PUNCTUATION)) + r"|.", re.DOTALL)
_SPACE = re.compile(r"\s+")
_FLAGS = re.compile(r"[a-z]*")
_NAME = re.compile(r"[A-Za-z_$][\w$]*")
_NUMBER = re.compile(r"\.?\d[\w.]*")
_NAMES_IN_STRING = re.compile(r"\s*[A-Za-z_$][\w$]*(?:\s*,\s*[A-Za-z_$][\w$]*)*\s*")
_DECLARES = frozenset({"const", "let", "var"})
_REFLECTION = frozenset(
    {
        ("JSON", "stringify"),
        ("Object", "keys"),
        ("Object", "entries"),
        ("Object", "getOwnPropertyNames"),
        ("Reflect", "ownKeys"),
    }
)
_STATEMENT_STARTS = _DECLARES | {";", "}", "import"}


class Token(NamedTuple):
    kind: Kind
    text: str
    start: int


@cache
def _reserved() -> frozenset[str]:
    listed = (files("generation.renderings") / "reserved" / "javascript.txt").read_text()
    return _KEYWORDS | {line for line in listed.splitlines() if line and not line.startswith("#")}


def is_source(path: str) -> bool:
    return path.endswith((".js", ".mjs", ".cjs"))


def fold(name: str) -> str:
    return name


def allowed(name: str) -> bool:
    return _NAME.fullmatch(name) is not None and name not in _reserved()


def tokens(source: str) -> list[Token]:
    return lex(source)[0]


def lex(source: str) -> tuple[list[Token], list[Token]]:
    """The code's tokens (template literal text as `template` tokens, its `${...}` as code),
    and the comments."""
    found: list[Token] = []
    comments: list[Token] = []
    position = 0
    # One entry per open `${`: the brace depth inside it, to find the `}` that closes it.
    templates: list[int] = []
    while position < len(source):
        character = source[position]
        if space := _SPACE.match(source, position):
            position = space.end()
        elif source.startswith(("//", "/*"), position):
            end = _after(source, "\n" if source[position + 1] == "/" else "*/", position + 2)
            comments.append(Token("comment", source[position:end], position))
            position = end
        elif character in "'\"":
            end = _end_of_string(source, position)
            found.append(Token("string", source[position:end], position))
            position = end
        elif character == "`" or (character == "}" and templates and templates[-1] == 0):
            if character == "}":
                templates.pop()
            position = _template_text(source, position + 1, found, templates)
        elif character == "/" and _regex_may_start(found):
            end = _end_of_regex(source, position)
            found.append(Token("regex", source[position:end], position))
            position = end
        elif match := _NAME.match(source, position) or _NUMBER.match(source, position):
            kind: Kind = "name" if match.re is _NAME else "number"
            found.append(Token(kind, match.group(), position))
            position = match.end()
        else:
            punctuator = _PUNCTUATOR.match(source, position)
            text = punctuator.group() if punctuator else character
            if templates and text in "{}":
                templates[-1] += 1 if text == "{" else -1
            found.append(Token("punctuation", text, position))
            position += len(text)
    return found, comments


@lru_cache(maxsize=256)  # a mission's files are rendered many times over
def _edits(source: str) -> tuple[tuple[int, str], ...]:
    """(offset, name) of each name in the code, and in backticks in its comments."""
    code, comments = lex(source)
    found = [(token.start, token.text) for token in code if token.kind == "name"]
    found += [
        (comment.start + offset, name)
        for comment in comments
        for offset, name in code_span_words(comment.text)
    ]
    return tuple(sorted(found))


def _template_text(source: str, position: int, found: list[Token], templates: list[int]) -> int:
    """Text of a template literal from `position` up to its end or its next `${`."""
    start = position
    while position < len(source):
        if source[position] == "\\":
            position += 2
        elif source[position] == "`":
            found.append(Token("template", source[start:position], start))
            return position + 1
        elif source.startswith("${", position):
            found.append(Token("template", source[start:position], start))
            templates.append(0)
            return position + 2
        else:
            position += 1
    raise RenderingFailed("a template literal is not closed")


def _after(source: str, terminator: str, position: int) -> int:
    found = source.find(terminator, position)
    return len(source) if found < 0 else found + len(terminator)


def _end_of_string(source: str, position: int) -> int:
    quote, position = source[position], position + 1
    while position < len(source) and source[position] not in (quote, "\n"):
        position += 2 if source[position] == "\\" else 1
    if position >= len(source) or source[position] != quote:
        raise RenderingFailed("a string is not closed")
    return position + 1


def _regex_may_start(found: list[Token]) -> bool:
    if not found:
        return True
    previous = found[-1]
    if previous.kind == "name":
        return previous.text in _BEFORE_EXPRESSION
    return previous.kind == "punctuation" and previous.text not in (")", "]", "}")


def _end_of_regex(source: str, position: int) -> int:
    position, in_class = position + 1, False
    while position < len(source) and source[position] != "\n":
        character = source[position]
        if character == "\\":
            position += 1
        elif character in "[]":
            in_class = character == "["
        elif character == "/" and not in_class:
            flags = _FLAGS.match(source, position + 1)
            return flags.end() if flags else position + 1
        position += 1
    raise RenderingFailed("a regular expression is not closed")


def scan(source_files: Sequence[SourceFile]) -> Scan:
    modules = {PurePosixPath(file.path).name.split(".")[0] for file in source_files}
    declared: set[str] = set()
    written: set[str] = set()  # properties the mission writes
    read: set[str] = set()  # properties the mission reads
    pinned: set[str] = set(modules) | _KEYWORDS
    taken: set[str] = set(modules)
    seen_in_visible: set[str] = set()
    reflective = False
    for file in source_files:
        found = tokens(file.text)
        reflective = reflective or _reflects(found)
        names = {token.text for token in found if token.kind == "name"}
        taken |= names | _string_names(found)
        pinned |= _string_names(found) | _external_bindings(found)
        if file.visible:
            seen_in_visible |= names
        for index, token in enumerate(found):
            if token.kind != "name":
                continue
            before = found[index - 1].text if index else ""
            if before in (".", "?."):
                read.add(token.text)
                after = found[index + 1].text if index + 1 < len(found) else ""
                if file.defines and after == "=":
                    written.add(token.text)
        if file.defines:
            declared |= set(_declared(found))
            written |= set(_properties(found))
    pinned |= read - written
    if reflective:  # property names become data: `JSON.stringify`, `Object.keys`, `for in`
        pinned |= written
    renamable = {
        name for name in (declared | written) - pinned if name in seen_in_visible and allowed(name)
    }
    return Scan(renamable=frozenset(renamable), taken=frozenset(taken))


def _reflects(found: Sequence[Token]) -> bool:
    """Whether the code reads property names as data."""
    for index, token in enumerate(found[:-2]):
        member = (token.text, found[index + 2].text) if found[index + 1].text == "." else None
        if member in _REFLECTION or (token.text == "in" and found[index - 1].kind == "name"):
            return True
    return False


def _string_names(found: Sequence[Token]) -> set[str]:
    """Names a string (or a template's text) spells out, which code might look up by it."""
    spelled: set[str] = set()
    for token in found:
        text = token.text[1:-1] if token.kind == "string" else token.text
        if token.kind in ("string", "template") and _NAMES_IN_STRING.fullmatch(text):
            spelled.update(_NAME.findall(text))
    return spelled


def _external_bindings(found: Sequence[Token]) -> set[str]:
    """Names bound from packages that are not the mission's: `require('x')`, `import ... 'x'`."""
    bound: set[str] = set()
    for index, token in enumerate(found):
        if token.kind != "string" or token.text[1:2] == ".":
            continue
        required = (
            index >= 2 and found[index - 1].text == "(" and found[index - 2].text == "require"
        )
        imported = index >= 1 and found[index - 1].text == "from"
        if not (required or imported):
            continue
        start = index - 1
        while start > 0 and found[start - 1].text not in _STATEMENT_STARTS:
            start -= 1
        while start > 0 and found[start - 1].text == "}":  # a destructuring pattern's end
            start = _opening(found, start - 1)
        bound.update(t.text for t in found[start:index] if t.kind == "name")
    return bound - _KEYWORDS - {"require"}


def _opening(found: Sequence[Token], close: int) -> int:
    depth = 0
    for index in range(close, -1, -1):
        depth += {"}": 1, "{": -1}.get(found[index].text, 0)
        if depth == 0:
            return index
    return 0


def _declared(found: Sequence[Token]) -> Iterator[str]:
    """Variables, functions, classes, parameters and methods the code declares."""
    for index, token in enumerate(found):
        after = found[index + 1] if index + 1 < len(found) else None
        if token.text in ("function", "class") and after is not None:
            following = found[index + 2] if after.text == "*" and index + 2 < len(found) else after
            if following.kind == "name":
                yield following.text
        elif token.text in _DECLARES and after is not None:
            if after.kind == "name":
                yield after.text
            elif after.text in ("{", "["):
                yield from _pattern_names(found, index + 1)
        elif token.kind == "name" and after is not None and after.text == "=>":
            yield token.text
        elif token.text == "(":
            close = _closing(found, index)
            before = found[index - 1] if index else None
            follows = found[close + 1].text if close + 1 < len(found) else ""
            method = (
                before is not None
                and before.kind == "name"
                and follows == "{"
                and (index < 2 or found[index - 2].text in ("{", "}", ",", ";", "static", "async"))
            )
            if method and before is not None:
                yield before.text
            if (
                follows == "=>"
                or method
                or _after_function(found, index)
                or (before is not None and before.text == "catch")
            ):
                yield from _parameters(found, index, close)


def _after_function(found: Sequence[Token], index: int) -> bool:
    return (index >= 1 and found[index - 1].text == "function") or (
        index >= 2 and found[index - 2].text == "function"
    )


def _parameters(found: Sequence[Token], open_: int, close: int) -> Iterator[str]:
    for index in range(open_ + 1, close):
        token = found[index]
        if token.kind == "name" and found[index - 1].text in ("(", ",", "{", "[", "...", ":"):
            yield token.text


def _pattern_names(found: Sequence[Token], open_: int) -> Iterator[str]:
    close = _closing(found, open_)
    for index in range(open_ + 1, close):
        token = found[index]
        if token.kind == "name" and found[index - 1].text in ("{", "[", ",", ":", "..."):
            yield token.text


def _properties(found: Sequence[Token]) -> Iterator[str]:
    """Object literal keys, shorthand properties and method shorthand the code writes: names
    directly inside braces (not in the arguments or array a comma also separates)."""
    enclosing: list[str] = []
    for index, token in enumerate(found[:-1]):
        if token.kind == "punctuation" and token.text in "([{":
            enclosing.append(token.text)
        elif token.kind == "punctuation" and token.text in ")]}" and enclosing:
            enclosing.pop()
        elif token.kind == "name" and index and enclosing[-1:] == ["{"]:
            before, after = found[index - 1].text, found[index + 1].text
            if before in ("{", ",") and after in (":", ",", "}", "("):
                yield token.text


def _closing(found: Sequence[Token], open_: int) -> int:
    pairs = {"(": ")", "[": "]", "{": "}"}
    opener, depth = found[open_].text, 0
    for index in range(open_, len(found)):
        if found[index].kind != "punctuation":
            continue
        if found[index].text == opener:
            depth += 1
        elif found[index].text == pairs[opener]:
            depth -= 1
            if depth == 0:
                return index
    raise RenderingFailed(f"a {opener!r} is not closed")


def rewrite(path: str, source: str, renames: Mapping[str, str]) -> str:
    pieces, position = [], 0
    for start, name in _edits(source):
        if name in renames:
            pieces += [source[position:start], renames[name]]
            position = start + len(name)
    return "".join([*pieces, source[position:]])
