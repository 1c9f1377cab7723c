"""Model calls in background mode: each is a response created once at the provider, its id
stored on the call's ledger row before the answer is awaited, and polled until it ends.

A call under way outlives the attempt that made it: an attempt that stops waiting (released at
a deploy, its process killed, cut off by an outage) leaves the call open on the ledger, and the
attempt that holds the job next takes it over by its id instead of paying for it again, as
long as the provider still holds it (OpenAI keeps a background response for polling for about
ten minutes). Polling reads a response, which bills nothing, so a failed poll is simply tried
again; only creating one is paid, and that is retried only when it is known not to have billed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TypeVar

import msgspec
import openai
from openai.types.responses import Response

from core.sql import DATABASE_ERRORS
from generation.ledger import CallRecord, Ledger, OpenCall, Purpose, book_at_ceiling
from generation.openai.answers import AnswerFormat, UnusableAnswer
from generation.openai.failures import RetryPolicy, book_failed_request
from generation.openai.prices import Rates
from generation.provider import ProviderError

log = logging.getLogger(__name__)

Draft = TypeVar("Draft", bound=msgspec.Struct)

# A response is read this long after it was created, then less and less often.
FIRST_POLL_SECONDS = 0.2
LONGEST_POLL_SECONDS = 5.0
UNDER_WAY = frozenset({"queued", "in_progress"})


class BackgroundCalls:
    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        provider: str,
        model: str,
        price: Rates,
        ceiling_usd: Decimal,
        max_answer_tokens: int,
        timeout_seconds: float,
        retry: RetryPolicy,
    ) -> None:
        self._client = client
        self._provider = provider
        self._model = model
        self._price = price
        self._ceiling = ceiling_usd
        self._max_answer_tokens = max_answer_tokens
        self._timeout = timedelta(seconds=timeout_seconds)
        self._retry = retry
        # The SDK imports its Responses resources and builds the response model on first use,
        # which holds the event loop for a second or more (heartbeats included): done here, at
        # start-up, instead of in the first generation.
        _ = client.responses
        Response.model_rebuild()

    async def create(
        self,
        purpose: Purpose,
        try_number: int,
        prompt: str,
        answer: AnswerFormat[Draft],
        accept: Callable[[Draft], Draft],
        *,
        seed: int,
        ledger: Ledger,
    ) -> Draft:
        """A new call, paid for, awaited until it ends."""
        tries = 0
        while True:
            tries += 1
            async with ledger.call(
                purpose,
                self._provider,
                self._model,
                ceiling_usd=self._ceiling,
                mode="background",
                try_number=try_number,
            ) as record:
                creating = asyncio.ensure_future(
                    self._client.responses.create(
                        model=self._model,
                        input=prompt,
                        text={"format": answer.text_format()},
                        background=True,
                        store=True,
                        max_output_tokens=self._max_answer_tokens,
                        metadata=call_metadata(ledger, purpose, try_number, seed),
                    )
                )
                creating.add_done_callback(_retrieved)
                try:
                    created = await asyncio.shield(creating)
                except asyncio.CancelledError:
                    await self._name_once_created(creating, record, ledger)
                    raise
                except openai.APIError as error:
                    failure = book_failed_request(
                        error,
                        record,
                        timeout_seconds=self._timeout.total_seconds(),
                        tries=tries,
                        ledger=ledger,
                    )
                else:
                    try:
                        await ledger.submitted(record, created.id)
                    except DATABASE_ERRORS:
                        # Nobody could find it again: it will never be used.
                        await self.abandon(created.id)
                        raise
                    response = await self._wait(created.id, datetime.now(UTC) + self._timeout)
                    if response is None:
                        record.outcome = "failed"
                        record.error = _dropped(created.id)
                        raise ProviderError(record.error)
                    return read_answer(response, record, answer, accept, self._price)
            await self._retry.sleep(self._retry.wait(failure, tries))

    async def _name_once_created(
        self, creating: asyncio.Future[Response], record: CallRecord, ledger: Ledger
    ) -> None:
        """The generation was stopped (released at a deploy) while the provider was creating
        its response: the response may exist and bill, so its id, once the provider names it,
        is stored, leaving the call open for the job's next attempt instead of paid again.
        Without an id (the request failed, or a second stop cut the wait), it is booked as a
        call that may have billed."""
        try:
            created = await asyncio.wait_for(
                asyncio.shield(creating), self._timeout.total_seconds()
            )
        except (openai.APIError, TimeoutError, asyncio.CancelledError):
            return
        with contextlib.suppress(*DATABASE_ERRORS):
            await ledger.submitted(record, created.id)

    async def answered(
        self,
        taken: OpenCall,
        answer: AnswerFormat[Draft],
        accept: Callable[[Draft], Draft],
        ledger: Ledger,
    ) -> Draft | None:
        """The answer of a call taken over; None when the provider no longer holds it."""
        fields = {"job_id": ledger.job_id, "attempt": ledger.attempt}
        response = await self._wait(taken.provider_id, taken.started_at + self._timeout)
        if response is None or response.status == "cancelled":
            # Gone, or cancelled as abandoned while the job waited (a budget stop): no answer
            # to take over.
            lost = _dropped(taken.provider_id) if response is None else _CANCELLED
            log.warning("call %s: %s; paying for it again", taken.call_id, lost, extra=fields)
            await ledger.dropped(taken, ceiling_usd=self._ceiling, error=lost)
            return None
        log.info(
            "took over call %s (response %s, %s) from an earlier attempt instead of paying again",
            taken.call_id,
            taken.provider_id,
            response.status,
            extra=fields,
        )
        async with ledger.resumed(taken, ceiling_usd=self._ceiling) as record:
            return read_answer(response, record, answer, accept, self._price)

    async def _wait(self, response_id: str, deadline: datetime) -> Response | None:
        """The response once it has ended (cancelled at the provider once the deadline has
        passed); None when the provider does not know it."""
        delay = FIRST_POLL_SECONDS
        while True:
            try:
                response = await self._client.responses.retrieve(response_id)
            except openai.NotFoundError:
                return None
            except openai.APIError as error:
                # Reading bills nothing: try again at the next poll.
                log.info("reading response %s failed, reading it again: %s", response_id, error)
            else:
                if response.status not in UNDER_WAY:
                    return response
            if datetime.now(UTC) >= deadline:
                return await self.cancel(response_id)
            await asyncio.sleep(delay)
            delay = min(LONGEST_POLL_SECONDS, delay * 1.5)

    async def cancel(self, response_id: str) -> Response | None:
        """Cancel a response that will never be used; it as it ended (one that ended first is
        not cancelled), or None when the provider does not know it."""
        try:
            return await self._client.responses.cancel(response_id)
        except openai.NotFoundError:
            return None

    async def abandon(self, provider_id: str) -> CallRecord | None:
        """Cancel a call that will never be used: what it cost, as a record to settle; None
        when the provider could not be asked (it is asked again later)."""
        record = CallRecord(provider_id=provider_id)
        try:
            response = await self.cancel(provider_id)
        except openai.APIError as error:
            log.warning("could not cancel response %s, trying again later: %s", provider_id, error)
            return None
        if response is None:
            record.outcome, record.error = "failed", _dropped(provider_id)
        else:
            settle(response, record, self._price)
            record.outcome = "failed"
            if response.status == "cancelled":
                record.error = "cancelled at the provider: its job will never use it"
            else:
                record.error = f"{response.status} after its job stopped waiting; never used"
        book_at_ceiling(record, self._ceiling)
        return record


def call_metadata(ledger: Ledger, purpose: Purpose, try_number: int, seed: int) -> dict[str, str]:
    """What a response is tagged with at the provider: whose call it is."""
    return {
        "job_id": str(ledger.job_id),
        "attempt": str(ledger.attempt),
        "purpose": purpose,
        "try": str(try_number),
        "seed": str(seed),
    }


def read_answer(
    response: Response,
    record: CallRecord,
    answer: AnswerFormat[Draft],
    accept: Callable[[Draft], Draft],
    rates: Rates,
) -> Draft:
    """The draft an ended response answers, its cost at `rates` on `record`; ProviderError,
    with the outcome on `record`, when it has none to use."""
    settle(response, record, rates)
    if record.outcome is not None:
        assert record.error is not None
        raise ProviderError(record.error)
    try:
        return accept(answer.read_response(response))
    except UnusableAnswer as unusable:
        record.outcome, record.error = unusable.outcome, str(unusable)
        raise ProviderError(str(unusable)) from None


def settle(response: Response, record: CallRecord, price: Rates) -> None:
    """What an ended response cost, and its outcome when it has no answer to read."""
    usage = response.usage
    if usage is not None:
        record.input_tokens, record.output_tokens = usage.input_tokens, usage.output_tokens
        record.cost_usd = price.cost(usage.input_tokens, usage.output_tokens)
        record.priced = True
    if response.status == "failed":
        detail = response.error.message if response.error else "no reason given"
        record.outcome = "failed"
        record.error = f"the model API failed the response ({detail})"
    elif response.status in UNDER_WAY or response.status == "cancelled":
        record.outcome, record.error = "failed", _CANCELLED


_CANCELLED = "the response was cancelled at the provider before it ended"


def _retrieved(creating: asyncio.Future[Response]) -> None:
    """A creation nobody waits for any more (a second stop cut the wait) ends unobserved."""
    if not creating.cancelled():
        creating.exception()


def _dropped(response_id: str) -> str:
    return f"the model API no longer holds response {response_id}"
