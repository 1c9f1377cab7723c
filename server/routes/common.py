"""What several routes share: request validation, the Idempotency-Key header, OpenAPI answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from litestar import Request
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import SecurityRequirement

from core import idempotency
from core.domains import Domain, DomainMap
from core.text import storable
from pool import requests
from pool.guard import UnknownTrack, allowed_domains
from qa import review
from server.auth import current_caller
from server.errors import BadRequest, MissingIdempotencyKey
from server.openapi import TRACKS, OneOf, Text
from server.services import Services

MAX_USER_ID = 200
MAX_COHORT = 200
MAX_IDEMPOTENCY_KEY = 200
# Longer than this cannot be a bigint, so it names no row.
MAX_ID_DIGITS = 18

# The OpenAPI security of a route anyone may call: it needs no key, unlike the app's others.
PUBLIC: list[SecurityRequirement] = [{}]

# What str.strip() takes away, spelled out: regular expression engines disagree on what \s is.
WHITE_SPACE = r"\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Text a person wrote: some character other than white space, and no NUL (which Postgres cannot
# store).
WORDS = rf"^[^\x00]*[^\x00{WHITE_SPACE}][^\x00]*$"
NO_NUL = r"^[^\x00]*$"
# Printable ASCII, without the spaces at either end that HTTP drops from a header's value.
PRINTABLE_ASCII = r"^[!-~]([ -~]*[!-~])?$"

UserId = Annotated[str, Text(min_length=1, max_length=MAX_USER_ID, pattern=WORDS)]
KEY_TEXT = Text(min_length=1, max_length=MAX_IDEMPOTENCY_KEY, pattern=PRINTABLE_ASCII)
KEY_MEANING = (
    "The same key from the same caller with the same body answers as the first request did "
    "and creates nothing new; with another body, 409."
)
IdempotencyKey = Annotated[
    str | None, KEY_TEXT.header("Idempotency-Key", required=False, description=KEY_MEANING)
]
RequiredIdempotencyKey = Annotated[
    str | None, KEY_TEXT.header("Idempotency-Key", required=True, description=KEY_MEANING)
]


class ProblemDetails(msgspec.Struct):
    """RFC 9457 problem details."""

    type: str
    status: int
    title: str
    detail: str


class UserTrack(msgspec.Struct, forbid_unknown_fields=True):
    """Who needs a mission, and the track whose domains they may be served."""

    user_id: UserId
    track: Annotated[str, OneOf(TRACKS)]


class ServeBody(UserTrack, forbid_unknown_fields=True, omit_defaults=True):
    """A serve may name the user's cohort: candidates who should not be able to pool answers.
    Without one, its idempotency fingerprint is a plain UserTrack's."""

    cohort: Annotated[str, Text(min_length=1, max_length=MAX_COHORT, pattern=WORDS)] | None = None


def made_by_scope(request: Request[Any, Any, Any], services: Services) -> int | None:
    """The API key whose jobs and instances the caller may see: its own, for a candidate_app
    key under WARMPOOL_CANDIDATE_KEY_SCOPE=own; None (everything) otherwise."""
    caller = current_caller(request)
    if caller.role == "candidate_app" and services.settings.candidate_key_scope == "own":
        return caller.key_id
    return None


def user_request(
    request: Request[Any, Any, Any],
    route: str,
    data: UserTrack,
    key: str | None,
    domain_map: DomainMap,
) -> requests.UserRequest:
    """The body of POST /v1/serve or /v1/jobs, checked, as the pool's request for that user."""
    domains = validate_user_track(data, domain_map)
    cohort = data.cohort if isinstance(data, ServeBody) else None
    if cohort is not None:
        _check_text(cohort, "cohort", MAX_COHORT, "name the cohort (a class, a hiring round)")
    caller = current_caller(request)
    return requests.UserRequest(
        user_id=data.user_id,
        track=data.track,
        cohort=cohort,
        domains=domains,
        key_id=caller.key_id,
        caller=caller.idempotency_scope,
        idempotency_key=key,
        fingerprint=idempotency.fingerprint(route, data),
    )


def path_id(text: str, missing: Callable[[str], Exception]) -> int:
    """The row id a path names. Anything but a decimal id of a bigint names no row: the
    `missing` error (a 404), not a validation error."""
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_ID_DIGITS:
        raise missing(text)
    return int(text)


def variant_path(mission_id: str, variant_id: str) -> tuple[int, int]:
    """The mission and variant ids a variant's path names; a 404 for one that names no row."""
    mission = path_id(mission_id, review.MissionNotFound)
    return mission, path_id(variant_id, lambda text: review.VariantNotFound(mission, text))


def check_domain(domain: str | None, domain_map: DomainMap) -> None:
    if domain is not None and domain not in domain_map.domains:
        raise BadRequest(
            f"unknown domain {domain!r}; known domains: {', '.join(sorted(domain_map.domains))}"
        )


def validate_user_track(request: UserTrack, domain_map: DomainMap) -> tuple[Domain, ...]:
    _check_text(request.user_id, "user_id", MAX_USER_ID, "send the candidate's id in your system")
    try:
        return allowed_domains(domain_map, request.track)
    except UnknownTrack as error:
        raise BadRequest(str(error)) from None


def _check_text(text: str, field: str, limit: int, when_empty: str) -> None:
    """A name that Postgres can store: not blank, at most `limit` characters, no NUL."""
    if not text.strip():
        raise BadRequest(f"{field} is empty; {when_empty}")
    if len(text) > limit:
        raise BadRequest(f"{field} is {len(text)} characters long; the limit is {limit}")
    if not storable(text):
        raise BadRequest(f"{field} contains a NUL character (\\x00); send it without one")


def idempotency_key(header: str | None, *, required: bool) -> str | None:
    if header is None:
        if required:
            raise MissingIdempotencyKey(
                "this route needs an Idempotency-Key header (1 to 200 printable ASCII "
                "characters, unique per request) so a retry never creates a second job"
            )
        return None
    if not 1 <= len(header) <= MAX_IDEMPOTENCY_KEY or not all(" " <= c <= "~" for c in header):
        raise BadRequest(
            "Idempotency-Key must be 1 to 200 printable ASCII characters; "
            f"got {len(header)} characters"
        )
    return header


def problems(*statuses: int) -> dict[int, ResponseSpec]:
    descriptions: dict[int, str] = {
        400: "Malformed request",
        401: "No API key, or an unknown one",
        403: "The key lacks the role this route needs",
        404: "Not found",
        409: "Conflict with the current state",
        422: "Invalid request",
        429: "Too many active jobs for this user",
        503: "The queue is full (where work is enqueued), or the database is unavailable",
    }
    return {
        status: ResponseSpec(
            data_container=ProblemDetails,
            description=descriptions[status],
            media_type="application/problem+json",
        )
        for status in statuses
    }
