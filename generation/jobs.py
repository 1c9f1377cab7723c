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

    def log_fields(self) -> dict[str, object]:
        """The structured fields of a log line about this job."""
        fields: dict[str, object] = {
            "job_id": self.id,
            "attempt": self.attempt,
            "lane": self.lane,
            "domain": self.domain,
        }
        if self.user_id is not None:
            fields["user_id"] = self.user_id
        return fields
