"""Settings: one struct read from the environment and validated once, at start-up.

Every setting has a default that works on one machine. A bad value stops start-up with a
message naming the variable, the value and what would be accepted.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec

Positive = msgspec.Meta(gt=0)
Count = Annotated[int, msgspec.Meta(ge=1)]
Seconds = Annotated[float, Positive]
# Strictly between 0 and 1.
Share = Annotated[float, msgspec.Meta(gt=0, lt=1)]


class SettingsError(ValueError):
    """A setting has a value warmpool cannot run with."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    database_url: str | None = None
    domain_map: Path = Path("domain_map.yaml")
    data_dir: Path = Path(".warmpool")
    global_cap: Count = 40
    max_pending: Count = 200
    user_cap: Count = 3
    tick_seconds: Seconds = 10.0
    stuck_after_seconds: Seconds = 600.0
    heartbeat_timeout_seconds: Seconds = 60.0
    pending_expiry_seconds: Seconds = 3600.0
    job_retention_seconds: Seconds = 7 * 24 * 3600.0
    # On SIGTERM, how long open requests and generations under way get to finish; the
    # generations still running then go back to the queue.
    shutdown_grace_seconds: Annotated[float, msgspec.Meta(ge=0)] = 120.0
    # A request not answered in this time gets 503 (the database is slow or unreachable).
    request_timeout_seconds: Seconds = 10.0
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    model: str = "gpt-4o-mini"
    openai_timeout_seconds: Seconds = 120.0
    # How model calls go out: background responses that outlive their worker, or requests
    # answered on their connection.
    openai_calls: Literal["background", "direct"] = "background"
    # The replenish lane's model calls as lines of a batch, at the Batch API's price ("replenish"),
    # or as every other call ("off"). A batch goes out once it holds batch_size lines or its
    # oldest line has waited batch_wait_seconds.
    batch: Literal["off", "replenish"] = "off"
    batch_size: Annotated[int, msgspec.Meta(ge=1, le=50_000)] = 50
    batch_wait_seconds: Seconds = 60.0
    prices_file: Path | None = None
    offline_delay_seconds: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    # USD the model may cost per UTC day, all workers together; unset: no budget.
    daily_budget_usd: Annotated[float, Positive] | None = None
    # The share of the daily budget that only interactive work (users waiting) may spend.
    budget_interactive_reserve: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.2
    # A sabotage whose proof fails is planted again, up to this many tries (each billed).
    sabotage_tries: Count = 3
    # Proofs this worker runs at once, each in its own sandbox slot.
    proof_slots: Count = 2
    proof_time_limit_seconds: Seconds = 30.0
    # The Postgres (with pgTAP) where SQL proofs get their throwaway databases; unset: the
    # server of warmpool's own database.
    proof_database_url: str | None = None
    worker_name: str = ""
    # What a candidate_app key sees and cancels: every job and instance ("all"), or only those
    # it made ("own"), when several candidate apps share one warmpool.
    candidate_key_scope: Literal["all", "own"] = "all"
    # How many generations one worker process runs at once; unset: the global cap, the
    # one-machine default. Several workers share the global cap; a smaller per-worker
    # figure spreads the generations (and their proofs) over the machines.
    worker_concurrency: Count | None = None
    # Encrypts and signs the reviewer UI's session cookies. Unset: a random secret kept in
    # data_dir/secret_key; API processes on several machines need one secret set here.
    secret_key: Annotated[str, msgspec.Meta(min_length=32)] | None = None
    # The session cookie is Secure: browsers send it over https only. False lets a reviewer
    # sign in over plain http, for a server that only this machine's browser reaches.
    secure_cookies: bool = True
    # A reviewer session ends this long after signing in, however busy it has been.
    session_lifetime_seconds: Seconds = 12 * 3600.0
    # The replenish lane's share of the global cap and of the pending limit. At 1 a refill
    # could take every slot and fill the queue, and a waiting user would find no room; at 0
    # the pool would never refill.
    replenish_share: Share = 0.5
    # A replenishment pass this often (one process at a time), ordering at most this many
    # generations per domain: the pool grows at most that fast, whatever a burst of serves
    # makes the forecast say, and each pass re-measures before ordering more.
    replenish_seconds: Seconds = 30.0
    replenish_max_per_pass: Count = 5
    # /metrics reads the tables at most this often per process, one read at a time, on a
    # connection of its own; scrapes in between get the last snapshot. At 0 every scrape reads
    # them, and scrapes that arrive during a read share it.
    metrics_refresh_seconds: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    # Set: /metrics answers only scrapes that send `Authorization: Bearer <token>`. Unset: any.
    metrics_token: Annotated[str, msgspec.Meta(pattern=r"^[!-~]{16,}$")] | None = None
    # Gradings running at once, all processes together; unset: one worker's proof slots.
    grading_cap: Count | None = None
    grading_user_cap: Count = 2
    grading_max_pending: Count = 200
    # Gradings of one instance within the window: each costs up to two sandbox runs, and each
    # verdict says a little of the hidden tests.
    grading_max_per_instance: Count = 10
    grading_window_seconds: Seconds = 3600.0
    # Each of a grading's two runs (visible tests, hidden tests) is killed at this limit.
    grading_time_limit_seconds: Seconds = 30.0

    @property
    def worker_slots(self) -> int:
        return min(self.worker_concurrency or self.global_cap, self.global_cap)

    @property
    def gradings_cap(self) -> int:
        return self.grading_cap or self.proof_slots

    @property
    def replenish_cap(self) -> int:
        """Replenish generations in flight, all processes together; at least one, so that the
        smallest cap still refills the pool."""
        return max(1, int(self.global_cap * self.replenish_share))

    @property
    def replenish_max_pending(self) -> int:
        """Pending replenish jobs at which the replenisher's enqueues are shed."""
        return max(1, int(self.max_pending * self.replenish_share))

    @property
    def heartbeat_timeout(self) -> timedelta:
        """How long a silent heartbeat is trusted: a job's, and a worker's (then it is no
        longer live, and what it can make no longer counts)."""
        return timedelta(seconds=self.heartbeat_timeout_seconds)

    @property
    def heartbeat_interval_seconds(self) -> float:
        # Four beats per timeout: one lost beat (a GC pause, a slow query) never looks like death.
        return self.heartbeat_timeout_seconds / 4


# Variable name -> (field, what a valid value looks like).
VARIABLES: dict[str, tuple[str, str]] = {
    "WARMPOOL_DATABASE_URL": ("database_url", "a postgresql:// URL"),
    "WARMPOOL_DOMAIN_MAP": ("domain_map", "the path of a domain map YAML file"),
    "WARMPOOL_DATA_DIR": ("data_dir", "a folder for the embedded database"),
    "WARMPOOL_GLOBAL_CAP": ("global_cap", "a whole number of at least 1"),
    "WARMPOOL_MAX_PENDING": ("max_pending", "a whole number of at least 1"),
    "WARMPOOL_USER_CAP": ("user_cap", "a whole number of at least 1"),
    "WARMPOOL_TICK_SECONDS": ("tick_seconds", "a number of seconds above 0"),
    "WARMPOOL_STUCK_AFTER_SECONDS": ("stuck_after_seconds", "a number of seconds above 0"),
    "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS": (
        "heartbeat_timeout_seconds",
        "a number of seconds above 0",
    ),
    "WARMPOOL_PENDING_EXPIRY_SECONDS": ("pending_expiry_seconds", "a number of seconds above 0"),
    "WARMPOOL_JOB_RETENTION_SECONDS": ("job_retention_seconds", "a number of seconds above 0"),
    "WARMPOOL_SHUTDOWN_GRACE_SECONDS": ("shutdown_grace_seconds", "a number of seconds, 0 or more"),
    "WARMPOOL_REQUEST_TIMEOUT_SECONDS": ("request_timeout_seconds", "a number of seconds above 0"),
    "OPENAI_API_KEY": ("openai_api_key", "an OpenAI API key"),
    "OPENAI_BASE_URL": ("openai_base_url", "an http(s) URL of an OpenAI-compatible API"),
    "WARMPOOL_MODEL": ("model", "a model name"),
    "WARMPOOL_OPENAI_TIMEOUT_SECONDS": ("openai_timeout_seconds", "a number of seconds above 0"),
    "WARMPOOL_OPENAI_CALLS": ("openai_calls", "background or direct"),
    "WARMPOOL_BATCH": (
        "batch",
        "off, or replenish (the replenish lane's model calls go through the Batch API)",
    ),
    "WARMPOOL_BATCH_SIZE": (
        "batch_size",
        "a whole number from 1 to 50000 (lines per batch)",
    ),
    "WARMPOOL_BATCH_WAIT_SECONDS": (
        "batch_wait_seconds",
        "a number of seconds above 0 (how long a line waits for its batch to fill)",
    ),
    "WARMPOOL_PRICES_FILE": ("prices_file", "the path of a YAML file of model prices"),
    "WARMPOOL_OFFLINE_DELAY_SECONDS": ("offline_delay_seconds", "a number of seconds, 0 or more"),
    "WARMPOOL_DAILY_BUDGET_USD": ("daily_budget_usd", "a number of US dollars above 0"),
    "WARMPOOL_BUDGET_INTERACTIVE_RESERVE": (
        "budget_interactive_reserve",
        "a share of the daily budget, at least 0 and below 1",
    ),
    "WARMPOOL_SABOTAGE_TRIES": ("sabotage_tries", "a whole number of at least 1"),
    "WARMPOOL_PROOF_SLOTS": ("proof_slots", "a whole number of at least 1"),
    "WARMPOOL_PROOF_TIME_LIMIT_SECONDS": (
        "proof_time_limit_seconds",
        "a number of seconds above 0",
    ),
    "WARMPOOL_PROOF_DATABASE_URL": (
        "proof_database_url",
        "a postgresql:// URL of a server with pgTAP, with the right to create databases and roles",
    ),
    "WARMPOOL_WORKER_CONCURRENCY": (
        "worker_concurrency",
        "a whole number of at least 1 (generations per worker process)",
    ),
    "WARMPOOL_WORKER_NAME": ("worker_name", "a name for this machine, unique among workers"),
    "WARMPOOL_CANDIDATE_KEY_SCOPE": (
        "candidate_key_scope",
        "all (a candidate_app key sees every job and instance) or own (only those it made)",
    ),
    "WARMPOOL_SECRET_KEY": ("secret_key", "at least 32 characters of random text"),
    "WARMPOOL_SECURE_COOKIES": (
        "secure_cookies",
        "true (the session cookie goes over https only) or false (plain http too)",
    ),
    "WARMPOOL_SESSION_LIFETIME_SECONDS": (
        "session_lifetime_seconds",
        "a number of seconds above 0 (how long a reviewer stays signed in)",
    ),
    "WARMPOOL_REPLENISH_SHARE": (
        "replenish_share",
        "a fraction strictly between 0 and 1 (of the global cap and the pending limit)",
    ),
    "WARMPOOL_REPLENISH_SECONDS": ("replenish_seconds", "a number of seconds above 0"),
    "WARMPOOL_REPLENISH_MAX_PER_PASS": (
        "replenish_max_per_pass",
        "a whole number of at least 1 (generations per domain per pass)",
    ),
    "WARMPOOL_METRICS_REFRESH_SECONDS": (
        "metrics_refresh_seconds",
        "a number of seconds, 0 or more (how old a /metrics snapshot may get)",
    ),
    "WARMPOOL_GRADING_CAP": (
        "grading_cap",
        "a whole number of at least 1 (gradings at once, all processes together)",
    ),
    "WARMPOOL_GRADING_USER_CAP": (
        "grading_user_cap",
        "a whole number of at least 1 (a user's submissions pending or running)",
    ),
    "WARMPOOL_GRADING_MAX_PENDING": (
        "grading_max_pending",
        "a whole number of at least 1 (pending submissions at which new ones get 503)",
    ),
    "WARMPOOL_GRADING_MAX_PER_INSTANCE": (
        "grading_max_per_instance",
        "a whole number of at least 1 (gradings of one instance within the window)",
    ),
    "WARMPOOL_GRADING_WINDOW_SECONDS": (
        "grading_window_seconds",
        "a number of seconds above 0 (the window WARMPOOL_GRADING_MAX_PER_INSTANCE counts in)",
    ),
    "WARMPOOL_GRADING_TIME_LIMIT_SECONDS": (
        "grading_time_limit_seconds",
        "a number of seconds above 0 (a grading's two runs together are stopped then)",
    ),
    "WARMPOOL_METRICS_TOKEN": (
        "metrics_token",
        "at least 16 printable ASCII characters without spaces (scrapers send it as "
        "'Authorization: Bearer <token>')",
    ),
}


def from_environment(environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    types = {field.name: field.type for field in msgspec.structs.fields(Settings)}
    given: dict[str, object] = {}
    for variable, (field, expected) in VARIABLES.items():
        raw = environ.get(variable, "").strip()
        if not raw:
            continue
        try:
            given[field] = msgspec.convert(raw, types[field], strict=False, dec_hook=_decode)
        except msgspec.ValidationError:
            raise SettingsError(
                f"{variable}={shown(variable, raw)} is not valid: expected {expected}"
            ) from None
    settings = Settings(**given)  # type: ignore[arg-type]
    _check_relations(settings)
    if not settings.worker_name:
        settings = msgspec.structs.replace(settings, worker_name=socket.gethostname())
    return settings


# Settings whose values no message or log line may show.
SECRET_VARIABLES = frozenset({"OPENAI_API_KEY", "WARMPOOL_SECRET_KEY", "WARMPOOL_METRICS_TOKEN"})
REDACTED = "[redacted]"


def shown(variable: str, value: str) -> str:
    """How a message may show a setting's value: secrets hidden, URLs without passwords."""
    if variable in SECRET_VARIABLES:
        return f"<hidden, {len(value)} characters>"
    return repr(redacted_url(value))


def redacted_url(url: str) -> str:
    """`url` without its password (unchanged when it has none)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{REDACTED}@{host}"))


def _decode(kind: type, value: object) -> object:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError


def _check_relations(settings: Settings) -> None:
    url = settings.database_url
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise SettingsError(
            f"WARMPOOL_DATABASE_URL={redacted_url(url)!r} is not valid: expected a "
            "postgresql:// URL, "
            "or leave it unset to use the embedded database"
        )
    proof_url = settings.proof_database_url
    if proof_url is not None and not proof_url.startswith(("postgresql://", "postgres://")):
        raise SettingsError(
            f"WARMPOOL_PROOF_DATABASE_URL={redacted_url(proof_url)!r} is not valid: expected a "
            "postgresql:// URL"
        )
    base = settings.openai_base_url
    if base is not None and not base.startswith(("http://", "https://")):
        raise SettingsError(f"OPENAI_BASE_URL={base!r} is not valid: expected an http(s) URL")
    if settings.heartbeat_timeout_seconds >= settings.stuck_after_seconds:
        raise SettingsError(
            "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS "
            f"({settings.heartbeat_timeout_seconds:g}) must be below "
            f"WARMPOOL_STUCK_AFTER_SECONDS ({settings.stuck_after_seconds:g}): "
            "a live job heartbeats many times before it counts as stuck"
        )
