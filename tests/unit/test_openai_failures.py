from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx2
import openai
import pytest

from generation.openai.failures import Failure, RetryPolicy, classify
from generation.provider import ProviderError

RATE_LIMITED = Failure("unbilled", True, "rate-limited")


def rate_limit(headers: dict[str, str]) -> openai.RateLimitError:
    request = httpx2.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx2.Response(429, headers=headers, request=request)
    body = {"message": "slow down", "code": "rate_limit_exceeded"}
    return openai.RateLimitError("Error code: 429", response=response, body=body)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "7"}, 0.25),
        ({"retry-after": "soon"}, None),
    ],
)
def test_retry_after_is_read_in_seconds_or_milliseconds(
    headers: dict[str, str], seconds: float | None
) -> None:
    failure = classify(rate_limit(headers), timeout_seconds=120)
    assert failure == Failure(
        "unbilled", True, "the model API rate-limited the request (429: slow down)", seconds
    )


def test_retry_after_may_be_an_http_date() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    retry_after = classify(rate_limit({"retry-after": later}), timeout_seconds=120).retry_after
    assert retry_after is not None
    assert 25 < retry_after <= 30


def test_the_backoff_doubles_within_its_ceiling_and_jitters_down_by_half_at_most() -> None:
    policy = RetryPolicy(max_tries=10, first_delay_seconds=1, max_delay_seconds=5)
    for tries, ceiling in [(1, 1), (2, 2), (3, 4), (4, 5), (9, 5)]:
        assert ceiling / 2 <= policy.wait(RATE_LIMITED, tries) <= ceiling


def test_retry_after_replaces_the_backoff_up_to_the_longest_wait() -> None:
    policy = RetryPolicy(longest_wait_seconds=60)
    assert policy.wait(Failure("unbilled", True, "rate-limited", retry_after=60), 1) == 60
    with pytest.raises(ProviderError, match="asked to wait 61 s, longer than the 60 s"):
        policy.wait(Failure("unbilled", True, "rate-limited", retry_after=61), 1)


def test_there_is_no_wait_after_the_last_try() -> None:
    with pytest.raises(ProviderError, match=r"^rate-limited; gave up after 3 tries, none billed$"):
        RetryPolicy(max_tries=3).wait(RATE_LIMITED, 3)


def status_error(status: int, reason: str) -> openai.APIStatusError:
    request = httpx2.Request("POST", "https://api.openai.com/v1/chat/completions")
    response = httpx2.Response(status, request=request)
    return openai.APIStatusError(
        f"Error code: {status}", response=response, body={"message": reason}
    )


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        # Refused before any processing: billed nothing, booked at nothing.
        (400, "unbilled"),
        (401, "unbilled"),
        (404, "unbilled"),
        # Failed while processing: may have billed, so the ledger books it at its ceiling.
        (500, "failed"),
        (503, "failed"),
    ],
)
def test_a_refused_request_billed_nothing_and_a_failed_one_may_have(
    status: int, outcome: str
) -> None:
    failure = classify(status_error(status, "nope"), timeout_seconds=120)
    assert (failure.outcome, failure.retryable) == (outcome, False)
