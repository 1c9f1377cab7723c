"""JavaScript and SQL mutants: one token changed inside the functions (or views) that a catalog
mission names as mutable.

A small tokenizer keeps strings whole and drops comments, so text is never mistaken for code.
In SQL, a dollar-quoted function body is code, not a string: it is tokenized too, and only its
tokens are mutable, so a function's signature is never touched.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from generation.offline.mutation import Mutation

Kind = Literal["word", "number", "string", "operator"]

_BOUNDARY = "a value exactly on the boundary is judged the other way"
_INVERTED = "the test gives the opposite answer"
_EITHER = "one of the conditions alone is now enough"
_BOTH = "all of the conditions are now required"
_FLAG = "the flag says the opposite"
_ARITHMETIC = "the arithmetic is wrong"
_ORDER_SWAPS = {
    "<": ("<=", _BOUNDARY),
    "<=": ("<", _BOUNDARY),
    ">": (">=", _BOUNDARY),
    ">=": (">", _BOUNDARY),
}


@dataclass(frozen=True)
class Token:
    text: str
    kind: Kind
    start: int
    end: int
    # SQL: inside a dollar-quoted function body.
    in_body: bool


@dataclass(frozen=True)
class _Dialect:
    line_comment: str
    quotes: str
    # SQL escapes a quote by doubling it, JavaScript by a backslash.
    doubled_quotes: bool
    word: re.Pattern[str]
    operators: tuple[str, ...]  # longest first; anything else is a one-character token
    regex_literals: bool
    dollar_bodies: bool
    case_insensitive: bool
    swaps: dict[str, tuple[str, str]]  # token -> (replacement, effect)
    # Words after which a `+` or `-` is a sign, not arithmetic.
    not_operands: frozenset[str]


# fmt: off
_JAVASCRIPT_OPERATORS = (
    "===", "!==", "**=", "...", "<=", ">=", "==", "!=", "&&", "||", "??", "?.", "=>",
    "++", "--", "+=", "-=", "*=", "/=", "%=", "**",
)
_SQL_NOT_OPERANDS = frozenset({
    "SELECT", "WHERE", "AND", "OR", "NOT", "THEN", "ELSE", "WHEN", "RETURN", "CASE", "BY",
    "IN", "IS", "AS", "ON", "HAVING", "BETWEEN", "INTERVAL", "LIMIT", "OFFSET",
})
# fmt: on

_JAVASCRIPT = _Dialect(
    line_comment="//",
    quotes="'\"`",
    doubled_quotes=False,
    word=re.compile(r"[A-Za-z_$][\w$]*"),
    operators=_JAVASCRIPT_OPERATORS,
    regex_literals=True,
    dollar_bodies=False,
    case_insensitive=False,
    swaps={
        **_ORDER_SWAPS,
        "===": ("!==", _INVERTED),
        "!==": ("===", _INVERTED),
        "==": ("!=", _INVERTED),
        "!=": ("==", _INVERTED),
        "&&": ("||", _EITHER),
        "||": ("&&", _BOTH),
        "true": ("false", _FLAG),
        "false": ("true", _FLAG),
        "+=": ("-=", _ARITHMETIC),
        "-=": ("+=", _ARITHMETIC),
    },
    not_operands=frozenset({"return", "typeof", "case", "in", "of", "new", "throw", "yield"}),
)

_SQL = _Dialect(
    line_comment="--",
    quotes="'\"",
    doubled_quotes=True,
    word=re.compile(r"[A-Za-z_][\w$]*|\$\d+"),
    operators=("<=", ">=", "<>", "!=", ":=", "::", "||", "->>", "->", "=>"),
    regex_literals=False,
    dollar_bodies=True,
    case_insensitive=True,
    swaps={
        **_ORDER_SWAPS,
        "=": ("<>", _INVERTED),
        "<>": ("=", _INVERTED),
        "!=": ("=", _INVERTED),
        "AND": ("OR", _EITHER),
        "OR": ("AND", _BOTH),
        "ASC": ("DESC", "the order is reversed"),
        "DESC": ("ASC", "the order is reversed"),
        "MIN": ("MAX", "the other extreme is taken"),
        "MAX": ("MIN", "the other extreme is taken"),
        "TRUE": ("FALSE", _FLAG),
        "FALSE": ("TRUE", _FLAG),
    },
    not_operands=_SQL_NOT_OPERANDS,
)

_BodyFinder = Callable[[list[Token], str], "range | None"]

_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_]\w*)?\$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_ARITHMETIC_SWAPS = {"+": "-", "-": "+", "*": "/", "/": "*"}
# Clause keywords that an SQL `=` can follow; after SET it assigns, and is no comparison.
_SQL_CLAUSES = frozenset({"SET", "WHERE", "ON", "AND", "OR", "WHEN", "HAVING", "IF", "CASE"})


def javascript_mutants(path: str, source: str, functions: Sequence[str]) -> list[Mutation]:
    return _mutants(path, source, functions, _JAVASCRIPT, _javascript_body)


def sql_mutants(path: str, source: str, functions: Sequence[str]) -> list[Mutation]:
    """Mutants of the named SQL functions (their dollar-quoted bodies) and views."""
    return _mutants(path, source, functions, _SQL, _sql_body)


def javascript_functions(source: str) -> list[str]:
    """Every name followed by a parameter list and a braced body: functions and methods (and
    the blocks of `if`, `for` and the like, whose mutants are theirs too)."""
    tokens = tokenize(source, _JAVASCRIPT)
    names = dict.fromkeys(token.text for token in tokens if token.kind == "word")
    return [name for name in names if _javascript_body(tokens, name) is not None]


def sql_functions(source: str) -> list[str]:
    """Every function and view the script creates."""
    tokens = tokenize(source, _SQL)
    return list(
        dict.fromkeys(
            following.text
            for token, following in itertools.pairwise(tokens)
            if token.text.upper() in ("FUNCTION", "VIEW") and following.kind == "word"
        )
    )


def tokenize(source: str, dialect: _Dialect) -> list[Token]:
    tokens: list[Token] = []
    position, body_tag = 0, ""
    while position < len(source):
        start = position
        kind: Kind = "operator"
        if source[position].isspace():
            position += 1
            continue
        if source.startswith(dialect.line_comment, position):
            position = _end_of(source, "\n", position)
            continue
        if source.startswith("/*", position):
            position = _end_of(source, "*/", position + 2)
            continue
        if dialect.dollar_bodies and (tag := _DOLLAR_TAG.match(source, position)):
            if not body_tag:
                body_tag = tag.group()
            elif tag.group() == body_tag:
                body_tag = ""
            position = tag.end()
            continue
        if source[position] in dialect.quotes:
            kind, position = "string", _end_of_string(source, position, dialect)
        elif dialect.regex_literals and source[position] == "/" and _regex_may_start(tokens):
            kind, position = "string", _end_of_regex(source, position)
        elif word := dialect.word.match(source, position):
            kind, position = "word", word.end()
        elif number := _NUMBER.match(source, position):
            kind, position = "number", number.end()
        else:
            operator = next((op for op in dialect.operators if source.startswith(op, position)), "")
            position += len(operator) or 1
        tokens.append(Token(source[start:position], kind, start, position, bool(body_tag)))
    return tokens


def _end_of(source: str, terminator: str, position: int) -> int:
    found = source.find(terminator, position)
    return len(source) if found < 0 else found + len(terminator)


def _end_of_string(source: str, position: int, dialect: _Dialect) -> int:
    quote = source[position]
    position += 1
    while position < len(source):
        if source[position] == "\\" and not dialect.doubled_quotes:
            position += 2
        elif source[position] == quote:
            if dialect.doubled_quotes and source.startswith(quote * 2, position):
                position += 2
            else:
                return position + 1
        else:
            position += 1
    return position


def _regex_may_start(tokens: list[Token]) -> bool:
    # After an operand a slash divides; anywhere else it opens a regular expression literal.
    if not tokens:
        return True
    previous = tokens[-1]
    if previous.kind == "word":
        return previous.text in _JAVASCRIPT.not_operands
    return previous.kind == "operator" and previous.text not in (")", "]", "}")


def _end_of_regex(source: str, position: int) -> int:
    position += 1
    in_class = False
    while position < len(source) and source[position] != "\n":
        character = source[position]
        if character == "\\":
            position += 1
        elif character == "[":
            in_class = True
        elif character == "]":
            in_class = False
        elif character == "/" and not in_class:
            flags = re.compile(r"[a-z]*").match(source, position + 1)
            assert flags is not None
            return flags.end()
        position += 1
    return position


def _javascript_body(tokens: list[Token], name: str) -> range | None:
    """The tokens between the braces of `function name(...) { ... }` or a method `name(...) {`."""
    for index, token in enumerate(tokens[:-1]):
        if token.text == name and tokens[index + 1].text == "(":
            close = _matching(tokens, index + 1)
            if close + 1 < len(tokens) and tokens[close + 1].text == "{":
                return range(close + 2, _matching(tokens, close + 1))
    return None


def _sql_body(tokens: list[Token], name: str) -> range | None:
    """A function's dollar-quoted body, or a view's query after its AS."""
    for index, token in enumerate(tokens[:-1]):
        created = token.text.upper()
        if created not in ("FUNCTION", "VIEW") or tokens[index + 1].text.lower() != name.lower():
            continue
        rest = range(index + 2, len(tokens))
        if created == "FUNCTION":
            first = next(i for i in rest if tokens[i].in_body)
            last = next((i for i in range(first, len(tokens)) if not tokens[i].in_body), None)
            return range(first, len(tokens) if last is None else last)
        as_keyword = next(i for i in rest if tokens[i].text.upper() == "AS")
        end = next((i for i in range(as_keyword, len(tokens)) if tokens[i].text == ";"), None)
        return range(as_keyword + 1, len(tokens) if end is None else end)
    return None


def _matching(tokens: list[Token], opening: int) -> int:
    pairs = {"(": ")", "{": "}", "[": "]"}
    closing, depth = pairs[tokens[opening].text], 0
    for index in range(opening, len(tokens)):
        if tokens[index].text == tokens[opening].text:
            depth += 1
        elif tokens[index].text == closing:
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unbalanced {tokens[opening].text!r}")


def _mutants(
    path: str, source: str, functions: Sequence[str], dialect: _Dialect, body_of: _BodyFinder
) -> list[Mutation]:
    tokens = tokenize(source, dialect)
    found = []
    for name in functions:
        body = body_of(tokens, name)
        if body is None:
            raise ValueError(f"{path} defines no function named {name}")
        for index in body:
            for start, end, text, effect in _edits(tokens, index, dialect):
                patched = source[:start] + text + source[end:]
                line = source.count("\n", 0, start)
                found.append(
                    Mutation(
                        path,
                        line + 1,
                        source.splitlines()[line].strip(),
                        patched.splitlines()[line].strip(),
                        effect,
                        patched,
                    )
                )
    return found


def _edits(tokens: list[Token], index: int, dialect: _Dialect) -> Iterator[_Edit]:
    token = tokens[index]
    previous = tokens[index - 1] if index > 0 else None
    following = tokens[index + 1] if index + 1 < len(tokens) else None
    key = token.text.upper() if dialect.case_insensitive else token.text
    if token.kind == "string":
        return
    if key in dialect.swaps and not (dialect is _SQL and key == "=" and _assigns(tokens, index)):
        replacement, effect = dialect.swaps[key]
        yield token.start, token.end, _same_case(replacement, token.text), effect
    elif token.text in _ARITHMETIC_SWAPS and _is_arithmetic(previous, following, dialect):
        yield token.start, token.end, _ARITHMETIC_SWAPS[token.text], _ARITHMETIC
    elif token.kind == "number" and token.text.isdigit():
        number = int(token.text)
        changed = number - 1 if number > 0 else number + 1
        yield token.start, token.end, str(changed), "a bound or amount is off by one"
    elif dialect is _JAVASCRIPT:
        yield from _javascript_edits(tokens, index)
    else:
        yield from _sql_edits(token, previous, following)


_Edit = tuple[int, int, str, str]  # start, end, replacement text, effect


def _javascript_edits(tokens: list[Token], index: int) -> Iterator[_Edit]:
    token = tokens[index]
    if token.text == "!" and index + 1 < len(tokens) and tokens[index + 1].text != "=":
        yield token.start, token.end, "", "the condition is inverted"
    elif token.text in ("min", "max") and index >= 2 and tokens[index - 2].text == "Math":
        other = "max" if token.text == "min" else "min"
        yield token.start, token.end, other, "the other extreme is taken"


def _sql_edits(token: Token, previous: Token | None, following: Token | None) -> Iterator[_Edit]:
    word, next_word = token.text.upper(), following.text.upper() if following else ""
    after_is = previous is not None and previous.text.upper() == "IS"
    if word == "IS" and next_word == "NULL":
        yield token.start, token.end, _same_case("IS NOT", token.text), "the null test is inverted"
    elif word == "IS" and next_word == "NOT" and following is not None:
        yield token.end, following.end, "", "the null test is inverted"
    elif word == "NOT" and following is not None and not after_is:
        yield token.start, following.start, "", "the condition is inverted"
    elif word == "LEFT" and next_word == "JOIN":
        yield (
            token.start,
            token.end,
            _same_case("INNER", token.text),
            "rows without a match are lost",
        )


def _is_arithmetic(previous: Token | None, following: Token | None, dialect: _Dialect) -> bool:
    # A sign follows no operand; a `+` next to a string joins text, which is no arithmetic.
    if previous is None or following is None or "string" in (previous.kind, following.kind):
        return False
    if previous.kind == "word":
        text = previous.text.upper() if dialect.case_insensitive else previous.text
        return text not in dialect.not_operands
    return previous.kind == "number" or previous.text in (")", "]")


def _assigns(tokens: list[Token], index: int) -> bool:
    clause = next(
        (t.text.upper() for t in reversed(tokens[:index]) if t.text.upper() in _SQL_CLAUSES), ""
    )
    return clause == "SET"


def _same_case(replacement: str, original: str) -> str:
    if original.isupper():
        return replacement.upper()
    if original.islower():
        return replacement.lower()
    return replacement
