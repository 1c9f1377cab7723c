"""The reviewer UI's sessions as rows: started at sign-in with an absolute lifetime, checked on
every page, ended at sign-out, and deleted a while after they stopped.

The cookie carries a random token and the table only its sha256, so a copy of the cookie is
worth nothing once its row has ended, and a copy of the table signs nobody in.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import UTC, datetime, timedelta

from core.sql import Executor, Queries
from server.auth import Caller

queries = Queries("server")
log = logging.getLogger(__name__)

# A stopped session's row stays this long, a record of who was signed in when.
KEEP_STOPPED_FOR = timedelta(days=7)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def start(
    executor: Executor, key_id: int, *, lifetime: timedelta, now: datetime | None = None
) -> str:
    """A new session for the key, ending `lifetime` after `now`; its token, for the cookie."""
    token = secrets.token_urlsafe(32)
    await executor.execute(
        queries["reviewer_session_start"], token_hash(token), key_id, lifetime, now
    )
    return token


async def signed_in_key(
    executor: Executor, token: str, *, now: datetime | None = None
) -> Caller | None:
    """The key of the session `token` names, unless it has ended, expired or lost its key."""
    row = await executor.fetchrow(queries["reviewer_session_key_if_live"], token_hash(token), now)
    return None if row is None else Caller(key_id=row["id"], name=row["name"], role=row["role"])


async def end(executor: Executor, token: str, *, now: datetime | None = None) -> None:
    await executor.execute(queries["reviewer_session_end_if_live"], token_hash(token), now)


class SessionRetention:
    """Deletes the sessions that stopped (signed out or expired) longer than `keep_for` ago."""

    def __init__(self, executor: Executor, *, keep_for: timedelta = KEEP_STOPPED_FOR) -> None:
        self._executor = executor
        self._keep_for = keep_for

    async def run_once(self, now: datetime | None = None) -> int:
        cutoff = (now or datetime.now(UTC)) - self._keep_for
        status = await self._executor.execute(
            queries["reviewer_sessions_delete_stopped_before"], cutoff
        )
        deleted = int(status.split()[-1])
        if deleted:
            log.info("deleted %d reviewer sessions stopped before %s", deleted, cutoff)
        return deleted
