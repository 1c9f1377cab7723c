"""Idempotency keys: the same key from the same caller with the same request returns what the
first request created and creates nothing new; with a different request it is a conflict.

Only a request that created something is remembered: one refused (user cap, full queue) or
failed rolls its key back with it, so retrying it later with the same key is safe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime

import msgspec

from core.sql import Connection, Executor, Queries

queries = Queries("core")


class IdempotencyConflict(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(
            f"Idempotency-Key {key!r} was already used for a different request; "
            "use a new key for a new request"
        )


class Remembered(msgspec.Struct, frozen=True):
    job_id: int | None
    instance_id: int | None


# Makes what a request asks for, inside its transaction, and says what it made.
Create = Callable[[], Awaitable[Remembered]]


def fingerprint(route: str, request: msgspec.Struct) -> bytes:
    # The decoded request, re-encoded: key order and whitespace do not make a new request.
    return hashlib.sha256(route.encode() + b"\0" + msgspec.json.encode(request)).digest()


async def claim(
    connection: Connection, caller: str, key: str, request_fingerprint: bytes
) -> Remembered | None:
    """Inside a transaction: None when the key is new (and now taken), else what it created."""
    if await connection.fetchval(queries["idempotency_claim"], caller, key, request_fingerprint):
        return None
    row = await connection.fetchrow(queries["idempotency_lookup"], caller, key)
    assert row is not None
    if bytes(row["fingerprint"]) != request_fingerprint:
        raise IdempotencyConflict(key)
    return Remembered(job_id=row["job_id"], instance_id=row["instance_id"])


async def remember(
    connection: Connection,
    caller: str,
    key: str,
    *,
    job_id: int | None = None,
    instance_id: int | None = None,
) -> None:
    await connection.execute(queries["idempotency_remember"], caller, key, job_id, instance_id)


async def once(
    connection: Connection,
    caller: str,
    key: str | None,
    request_fingerprint: bytes,
    create: Create,
) -> tuple[Remembered, bool]:
    """Inside a transaction: what `create` makes, made now (True) or, for a key seen before,
    what the first request with it made (False). Without a key, `create` runs every time."""
    if key is not None:
        remembered = await claim(connection, caller, key, request_fingerprint)
        if remembered is not None:
            return remembered, False
    made = await create()
    if key is not None:
        await remember(connection, caller, key, job_id=made.job_id, instance_id=made.instance_id)
    return made, True


async def forget_before(connection: Executor, cutoff: datetime) -> None:
    await connection.execute(queries["idempotency_forget_before"], cutoff)
