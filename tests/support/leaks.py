"""What a leaked copy of an instance looks like: a fragment of one of its files, reformatted."""

from __future__ import annotations

# How a line comment starts, by language.
COMMENT = {"python": "#", "javascript": "//", "sql": "--"}


def reformatted_fragment(text: str, *, language: str = "python") -> str:
    """20 lines from the middle of a file, re-indented, spaced and commented otherwise."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) >= 20, "a file long enough for a fragment"
    start = (len(lines) - 20) // 2
    fragment = []
    for number, line in enumerate(lines[start : start + 20]):
        body = line.lstrip(" ")
        indent = "  " * ((len(line) - len(body)) // 4)
        comment = f"  {COMMENT[language]} leaked" if number % 3 else ""
        fragment.append(f"{indent}{body.replace(', ', ',')}{comment}")
        fragment.append("")
    return f"{COMMENT[language]} found on a forum\n" + "\n".join(fragment)


def longest_file(files: dict[str, str]) -> str:
    return max(files.values(), key=lambda text: len(text.splitlines()))
