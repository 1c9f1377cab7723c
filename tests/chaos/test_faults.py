"""The chaos suite's database faults on a database of the test's own: the terminations end every
session but the observers', and the default isolation applies to the sessions made after it."""

from __future__ import annotations

import asyncpg
import pytest

from core.sql import OUTAGE_ERRORS
from tests.chaos.faults import (
    ISOLATION_DEFAULT,
    connect_observer,
    default_to_repeatable_read,
    terminate_sessions,
)


async def test_every_session_but_the_observers_is_terminated(database_url: str) -> None:
    sessions = [await asyncpg.connect(database_url) for _ in range(2)]
    observer, other_observer = [await connect_observer(database_url) for _ in range(2)]
    try:
        terminated = await terminate_sessions(observer)

        assert terminated == 2
        for session in sessions:
            # However asyncpg learns of it: reset, closed, or its protocol-state error.
            with pytest.raises(OUTAGE_ERRORS):
                await session.fetchval("SELECT 1")
        assert await other_observer.fetchval("SELECT 1") == 1
    finally:
        for connection in (*sessions, observer, other_observer):
            await connection.close()


async def test_sessions_made_after_the_default_changed_begin_in_repeatable_read(
    database_url: str,
) -> None:
    before = await asyncpg.connect(database_url)
    try:
        await default_to_repeatable_read(before)
        after = await asyncpg.connect(database_url)
        try:
            assert await after.fetchval("SHOW transaction_isolation") == ISOLATION_DEFAULT
        finally:
            await after.close()
        assert await before.fetchval("SHOW transaction_isolation") == "read committed"
    finally:
        await before.close()
