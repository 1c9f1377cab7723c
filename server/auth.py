"""API keys and roles: `Authorization: Bearer <key>`, one role per key, admin may do everything.

Only a key's sha256 is stored. No key or an unknown key is 401; a known key without the
route's role is 403.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any, Literal, get_args

import asyncpg
import msgspec
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from core.sql import Executor, Queries

queries = Queries("server")

Role = Literal["candidate_app", "qa_reviewer", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)

# A verified key is trusted this long without asking the database again: a revocation takes
# effect within this time, and the serve path saves a round trip.
CACHE_SECONDS = 5.0


class Caller(msgspec.Struct, frozen=True):
    key_id: int
    name: str
    role: Role

    @property
    def idempotency_scope(self) -> str:
        return f"key:{self.key_id}"


def new_key() -> str:
    return "wp_" + secrets.token_urlsafe(32)


def key_hash(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


async def create_key(connection: Executor, role: Role, name: str) -> str:
    key = new_key()
    await connection.execute(queries["api_key_insert"], name, role, key_hash(key))
    return key


async def bootstrap_keys(db: asyncpg.Pool) -> dict[Role, str]:
    """Create one key per role when there are no keys at all; several starters create one set."""
    async with db.acquire() as connection, connection.transaction():
        await connection.execute(queries["api_keys_bootstrap_lock"])
        if await connection.fetchval(queries["api_keys_exist"]):
            return {}
        return {role: await create_key(connection, role, f"first-start-{role}") for role in ROLES}


class KeyStore:
    def __init__(self, db: asyncpg.Pool) -> None:
        self._db = db
        self._verified: dict[bytes, tuple[float, Caller]] = {}

    async def lookup(self, key: str) -> Caller | None:
        digest = key_hash(key)
        cached = self._verified.get(digest)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        row = await self._db.fetchrow(queries["api_key_by_hash"], digest)
        if row is None:
            self._verified.pop(digest, None)
            return None
        caller = Caller(key_id=row["id"], name=row["name"], role=row["role"])
        self._verified[digest] = (time.monotonic() + CACHE_SECONDS, caller)
        return caller


class RoleGuard:
    """A route guard: the caller's key must have `role`, or be an admin key. The role stays
    readable on the route, so who may call what can be listed from the routes themselves."""

    def __init__(self, role: Role) -> None:
        self.role = role

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
    ) -> None:
        caller = await authenticate(connection)
        if caller.role not in (self.role, "admin"):
            raise PermissionDeniedException(
                detail=f"this route needs a key with the role {self.role!r}"
                + ("" if self.role == "admin" else " (or 'admin')")
                + "; "
                f"the key {caller.name!r} has the role {caller.role!r}"
            )
        connection.state.caller = caller


def requires(role: Role) -> RoleGuard:
    return RoleGuard(role)


async def authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Caller:
    header = connection.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise NotAuthorizedException(
            detail="send an API key as 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    keys: KeyStore = connection.app.state.services.keys
    caller = await keys.lookup(key.strip())
    if caller is None:
        raise NotAuthorizedException(
            detail="the API key is not known (mistyped, or revoked); ask an operator for a key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return caller


def current_caller(connection: ASGIConnection[Any, Any, Any, Any]) -> Caller:
    caller: Caller = connection.state.caller
    return caller
