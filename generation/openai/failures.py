"""What a failed call to the model API means for money, and whether to try it again.

OpenAI has no idempotency key: a request that reached the model may have billed even when no
answer came back, so trying it again could pay for the same generation twice. Only failures
known not to have billed are retried: the connection was never made, or the API rate-limited
the request (429) before processing it. A 429 for an exhausted quota did not bill either, but
no retry can help it.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import httpx2
import openai

from generation.ledger import CallRecord, Ledger
from generation.provider import ProviderError

_MAY_HAVE_BILLED = "not retried, since it may have billed"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failure:
    outcome: Literal["unbilled", "failed"]
    retryable: bool
    message: str
    # How long the API asked us to wait before trying again (Retry-After), in seconds.
    retry_after: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter over a few tries; Retry-After, when given, wins."""

    max_tries: int = 4
    first_delay_seconds: float = 1.0
    max_delay_seconds: float = 20.0
    # A longer Retry-After fails the call instead: the job has a deadline to keep.
    longest_wait_seconds: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def wait(self, failure: Failure, tries: int) -> float:
        """Seconds to wait before try `tries + 1`; raises ProviderError when there is none."""
        if tries >= self.max_tries:
            raise ProviderError(f"{failure.message}; gave up after {tries} tries, none billed")
        if failure.retry_after is None:
            backoff = self.first_delay_seconds * 2.0 ** (tries - 1)
            return min(self.max_delay_seconds, backoff) * random.uniform(0.5, 1.0)
        if failure.retry_after > self.longest_wait_seconds:
            raise ProviderError(
                f"{failure.message}; it asked to wait {failure.retry_after:g} s, longer than "
                f"the {self.longest_wait_seconds:g} s a generation waits"
            )
        return failure.retry_after


def book_failed_request(
    error: openai.APIError,
    record: CallRecord,
    *,
    timeout_seconds: float,
    tries: int,
    ledger: Ledger,
) -> Failure:
    """Book a request the API did not answer on `record`: the failure to wait out before trying
    again, or ProviderError when it may not be tried again."""
    failure = classify(error, timeout_seconds)
    record.outcome, record.error = failure.outcome, failure.message
    if not failure.retryable:
        raise ProviderError(failure.message) from error
    log.info(
        "call %s, try %d, not billed: %s",
        record.call_id,
        tries,
        failure.message,
        extra={"job_id": ledger.job_id, "attempt": ledger.attempt},
    )
    return failure


def classify(error: openai.APIError, timeout_seconds: float) -> Failure:
    if isinstance(error, openai.APIConnectionError):
        return _connection_failure(error, timeout_seconds)
    if isinstance(error, openai.RateLimitError):
        if error.code == "insufficient_quota":
            return Failure(
                "unbilled",
                False,
                "the OpenAI account's quota is used up (429 insufficient_quota): "
                "add credit or raise its spending limit",
            )
        return Failure(
            "unbilled",
            True,
            f"the model API rate-limited the request (429: {_detail(error)})",
            retry_after=_retry_after(error.response.headers),
        )
    if isinstance(error, openai.APIStatusError):
        answered = f"the model API answered {error.status_code} {error.response.reason_phrase}"
        if error.status_code >= 500:
            return Failure("failed", False, f"{answered} ({_detail(error)}); {_MAY_HAVE_BILLED}")
        # Refused before any processing (a bad request, a bad key): nothing was billed.
        return Failure("unbilled", False, f"{answered}: {_detail(error)}")
    return Failure("failed", False, f"the model API's answer could not be read: {error}")


def _connection_failure(error: openai.APIConnectionError, timeout_seconds: float) -> Failure:
    cause = error.__cause__
    # The request was never sent: nothing can have been billed.
    if isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout):
        url = error.request.url
        where = url.host if url.port is None else f"{url.host}:{url.port}"
        return Failure(
            "unbilled",
            True,
            f"could not connect to the model API at {where} ({cause or type(cause).__name__})",
        )
    if isinstance(error, openai.APITimeoutError):
        return Failure(
            "failed",
            False,
            f"the model API did not answer within {timeout_seconds:g} s; {_MAY_HAVE_BILLED}",
        )
    return Failure(
        "failed",
        False,
        f"the connection to the model API broke mid-request ({cause!r}); {_MAY_HAVE_BILLED}",
    )


def _detail(error: openai.APIStatusError) -> str:
    if isinstance(error.body, dict) and error.body.get("message"):
        return str(error.body["message"])
    return error.message


def _retry_after(headers: httpx2.Headers) -> float | None:
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is in GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
