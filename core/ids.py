"""An entity's id (a job's, a mission's, an instance's...): an int everywhere inside warmpool,
a string on the wire, as the HTTP API has always shown ids. The app encodes it (and the
OpenAPI document declares it) as a string; nothing inside converts it back and forth."""

from __future__ import annotations


class Id(int):
    __slots__ = ()

    @classmethod
    def of(cls, value: int | None) -> Id | None:
        return None if value is None else cls(value)
