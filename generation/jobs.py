"""A claimed job, as the dispatcher hands it to the worker."""

from __future__ import annotations

from datetime import datetime

import msgspec

from generation.queue import Lane


class ClaimedJob(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    attempt: int
    lane: Lane
    user_id: str | None
    track: str | None
    domain: str
    created_at: datetime
