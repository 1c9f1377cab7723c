"""Fingerprints of code, so that a leaked copy names the rendering it came from (winnowing, as
MOSS does).

Text is normalised first, so that reformatting changes nothing: comments go (`#`, `//` and `--`
to the end of the line, `/* ... */`), then every whitespace character, trailing commas, and the
kind of quote. Identifiers and literals stay: renderings of one mission differ in identifiers.
One normalisation serves every language, since a leaked text does not say its language; it
also drops what only looks like a comment (Python's `//`, a `#` in a string), alike on both
sides. Of the hashes of every K characters of what is left, winnowing keeps the least of each
window of W, so any run of K + W - 1 characters that two texts share gives both a fingerprint
in common, wherever the run starts.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterable

K = 24
W = 16

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"(?:#|//|--)[^\n]*")
_SPACE = re.compile(r"\s+")
_TRAILING_COMMA = re.compile(r",(?=[)\]}])")


def normalised(text: str) -> str:
    text = _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", text))
    text = _TRAILING_COMMA.sub("", _SPACE.sub("", text))
    return text.replace("'", '"')


def fingerprints(text: str) -> set[int]:
    """The winnowed hashes of `text`, as signed 64-bit numbers (a Postgres bigint)."""
    code = normalised(text).encode()
    hashes = [
        int.from_bytes(hashlib.blake2b(code[start : start + K], digest_size=8).digest(), "big")
        - 2**63
        for start in range(len(code) - K + 1)
    ]
    if len(hashes) <= W:
        return {min(hashes)} if hashes else set()
    kept: set[int] = set()
    # Indexes of the window's candidates, hashes increasing: the front is the window's least.
    window: deque[int] = deque()
    for index, value in enumerate(hashes):
        while window and hashes[window[-1]] >= value:
            window.pop()
        window.append(index)
        if window[0] <= index - W:
            window.popleft()
        if index >= W - 1:
            kept.add(hashes[window[0]])
    return kept


def of_files(texts: Iterable[str]) -> set[int]:
    """A set of files' fingerprints: each file on its own, since a fragment is of one file."""
    return set().union(*(fingerprints(text) for text in texts))
