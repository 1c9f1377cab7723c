"""Serving: a per-user instance of the least-served approved mission a track allows, made from
a ready rendering of the mission's least-served live variant, within the cohort's share."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from core.domains import Domain
from core.ids import Id
from core.sql import Connection, Executor, Queries
from core.text import storable

queries = Queries("pool")

USER_INSTANCES_LIMIT = 500
# Bounds the re-planning of one serve under contention; every round waits for another serve
# to commit, and stock is finite, so in practice a few rounds suffice.
SERVE_ROUNDS = 100


class Instance(msgspec.Struct, frozen=True, kw_only=True):
    id: Id
    mission_id: Id
    # The planted bug this instance carries: at most the domain's bug_share instances share one.
    variant_id: Id
    user_id: str
    # The cohort the serve named (candidates who should not pool answers), if any.
    cohort: str | None
    track: str
    domain: str
    language: str
    title: str
    brief: str
    # The sabotaged code and the tests the candidate runs; never the gold or the bug summary.
    files: dict[str, str]
    serve_number: int
    created_at: datetime


class InstanceNotFound(Exception):
    def __init__(self, instance_id: int | str) -> None:
        super().__init__(f"there is no instance {str(instance_id)!r}")


async def serve(
    connection: Connection,
    *,
    user_id: str,
    track: str,
    domains: tuple[Domain, ...],
    cohort: str | None = None,
    created_by: int | None = None,
    now: datetime | None = None,
) -> Instance | None:
    """Inside a transaction: serve the user an instance, made by the API key `created_by`, or
    None when there is no stock (within the cohort's share of each mission, with a `cohort`)."""
    names = [domain.name for domain in domains]
    cohort_shares = [domain.cohort_share for domain in domains]
    waited_for = None
    for _ in range(SERVE_ROUNDS):
        row = await connection.fetchrow(
            queries["pool_serve_round"],
            names,
            user_id,
            track,
            now,
            waited_for,
            created_by,
            cohort,
            cohort_shares,
            None,
        )
        if row is not None:
            return instance_from_row(row)
        # Nothing served: the round held nothing afterwards (the same user served twice at
        # once shows the other serve's instance from now on).
        if waited_for is not None:
            # The mission waited for went to another serve: plan again from the start, where
            # any unlocked mission at the lowest count will do.
            waited_for = None
            continue
        # Every eligible mission is locked by a concurrent serve (or there is none): wait for
        # one of the least served, then serve it if it still is.
        waited_for = await connection.fetchval(
            queries["mission_least_served_id"], names, user_id, cohort, cohort_shares
        )
        if waited_for is None:
            return None
    return None


async def serve_to_waiting_user(
    connection: Connection, *, mission_id: int, job_id: int
) -> Instance | None:
    """The instance of `mission_id` for the user whose interactive job is `job_id`, made by the
    key that made the job, in its cohort; counted as a serve like any other. The caller's
    transaction holds the mission's row (it approved or stored the mission). A user who has
    the mission already gets nothing more: a serve count is the mission's instances. Their
    cohort's share does not apply: the mission was made for them."""
    job = await connection.fetchrow(queries["job_waiting_for_mission"], job_id)
    if job is None:
        return None
    row = await connection.fetchrow(
        queries["pool_serve_round"],
        [job["domain"]],
        job["user_id"],
        job["track"],
        None,
        None,
        job["created_by"],
        job["cohort"],
        None,
        mission_id,
    )
    return None if row is None else instance_from_row(row)


async def neediest_domain(connection: Executor, domains: tuple[Domain, ...]) -> str:
    name = await connection.fetchval(queries["domains_by_stock"], [d.name for d in domains])
    return str(name)


async def get(connection: Executor, instance_id: int, *, made_by: int | None = None) -> Instance:
    """The instance; with `made_by`, only if that API key made it."""
    row = await connection.fetchrow(queries["instance_by_id"], instance_id, made_by)
    if row is None:
        raise InstanceNotFound(instance_id)
    return instance_from_row(row)


async def of_user(
    connection: Executor, user_id: str, *, made_by: int | None = None
) -> list[Instance]:
    """The user's instances, newest first; with `made_by`, only those that API key made."""
    if not storable(user_id):
        return []  # no user was ever served under an id Postgres cannot store
    rows = await connection.fetch(
        queries["instances_of_user"], user_id, USER_INSTANCES_LIMIT, made_by
    )
    return [instance_from_row(row) for row in rows]


def instance_from_row(row: asyncpg.Record) -> Instance:
    return Instance(
        id=Id(row["id"]),
        mission_id=Id(row["mission_id"]),
        variant_id=Id(row["variant_id"]),
        user_id=row["user_id"],
        cohort=row["cohort"],
        track=row["track"],
        domain=row["domain"],
        language=row["language"],
        title=row["title"],
        brief=row["brief"],
        files=row["files"],
        serve_number=row["serve_number"],
        created_at=row["created_at"],
    )
