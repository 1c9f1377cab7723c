"""Every advisory lock the code takes is one of the registry's (core/locks.py), under its key,
and no two entries share a key."""

from __future__ import annotations

import re
from pathlib import Path

from core.locks import LOCKS
from core.sql import parse

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "server", "generation", "pool", "qa")
# pg_advisory_lock(...), pg_try_advisory_xact_lock_shared(...), pg_advisory_unlock(...), ...
CALL = re.compile(
    r"pg_(?:try_)?advisory_(?:xact_)?(?:un)?lock(?:_shared)?\(([^)]*(?:\([^)]*\))?[^)]*)\)"
)
NAMED = re.compile(r"advisory lock: (\w+)")


def key_of(arguments: str) -> tuple[int, ...] | int:
    """The registry form of a call's key: a bigint, (class,) when the detail varies, or the pair."""
    parts = [part.strip() for part in arguments.split(",")]
    if len(parts) == 1:
        return int(parts[0])
    first, second = parts
    return (int(first), int(second)) if second.isdigit() else (int(first),)


def sql_files() -> list[Path]:
    """The named queries and the migrations (the catalog's SQL is missions' content)."""
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.sql")
        if path.name.endswith("queries.sql") or path.parent.name == "migrations"
    )


def test_no_two_entries_share_a_key() -> None:
    keys = [lock.key for lock in LOCKS.values()]
    classes = [key[0] for key in keys if isinstance(key, tuple)]
    assert len(set(keys)) == len(keys)
    assert len(set(classes)) == len(classes), "two entries share a class of pairs"


def test_every_named_query_takes_the_lock_it_names_under_its_key() -> None:
    seen = set()
    for path in sql_files():
        if "migrations" in path.parts:
            continue
        for name, statement in parse(path.read_text(), str(path)).items():
            calls = CALL.findall(statement)
            if not calls:
                continue
            named = NAMED.findall(statement)
            assert named, f"{path.name}: {name} takes an advisory lock without naming it"
            for call in calls:
                assert LOCKS[named[0]].key == key_of(call), f"{path.name}: {name}"
            seen.add(named[0])
    assert seen == set(LOCKS) - {"dispatch"}, "the dispatch lock is the claim function's"


def test_the_migrations_take_registered_locks_only() -> None:
    keys = {lock.key for lock in LOCKS.values()}
    for path in sql_files():
        if "migrations" in path.parts:
            for call in CALL.findall(path.read_text()):
                assert key_of(call) in keys, f"{path.name}: pg_advisory_*({call})"


def test_python_code_takes_no_advisory_lock_of_its_own() -> None:
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            assert not CALL.search(path.read_text()), f"{path}: SQL belongs in a queries.sql"
