"""Model calls of the replenish lane as lines of a batch (WARMPOOL_BATCH=replenish): nobody waits
for them, and the Batch API answers them at half the price.

A call is written, not sent: its ledger row (mode `batch`, its provider id the line's custom
id), then its line with the request it sends; the generation then stops with `CallDeferred`, and
its job goes back to the queue, waiting for the line and holding no slot. One process at a time
gathers the lines into batches and stores each line's answer or failure (batches.py); the job is
then claimed again, runs its pipeline again, and each call it makes takes over the earlier
attempt's call of the same purpose and try, reading the stored answer instead of paying again.
The attempt that takes it over settles it, at the batch price. A line the batch did not answer
(it expired, the provider failed it) is booked as unbilled and tried again as a new line, up
to `LINE_TRIES` lines, after which the job fails with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import NoReturn, TypeVar

import msgspec
from openai.types.responses import Response

from generation.ledger import Ledger, OpenCall, Purpose
from generation.openai.answers import AnswerFormat
from generation.openai.background import call_metadata, read_answer
from generation.openai.prices import Rates
from generation.provider import CallDeferred, ProviderError

log = logging.getLogger(__name__)

Draft = TypeVar("Draft", bound=msgspec.Struct)

# Lines one call may take: a line the batch left unanswered is written again until then.
LINE_TRIES = 3


def custom_id(ledger: Ledger, purpose: Purpose, try_number: int) -> str:
    """A line's name within its batch and at the provider: its job, attempt, purpose and try.
    An attempt writes one line per purpose and try, then waits for it."""
    return f"job-{ledger.job_id}-attempt-{ledger.attempt}-{purpose}-try-{try_number}"


@dataclass(frozen=True)
class BatchCalls:
    provider: str
    model: str
    # The Batch API's price of the model, and what one call may cost at it.
    rates: Rates
    ceiling_usd: Decimal
    max_answer_tokens: int

    async def answered(
        self,
        taken: OpenCall,
        answer: AnswerFormat[Draft],
        accept: Callable[[Draft], Draft],
        ledger: Ledger,
    ) -> Draft | None:
        """The answer of a batch call taken over; None when its line failed and may be written
        again."""
        line = await ledger.batch_line(taken)
        if line.under_way:
            # Claimed again before its batch ended (its worker died after writing the line).
            raise CallDeferred(taken.call_id)
        async with ledger.resumed(taken, ceiling_usd=self.ceiling_usd) as record:
            if line.answer is not None:
                response = Response.model_validate(line.answer)
                return read_answer(response, record, answer, accept, self.rates)
            record.outcome, record.error = "unbilled", line.error or "the batch failed the line"
        if not line.retryable or line.failures >= LINE_TRIES:
            tried = "" if not line.retryable else f"; gave up after {line.failures} batch lines"
            raise ProviderError(f"{record.error}{tried}")
        log.info(
            "call %s: %s; writing it as a new line",
            taken.call_id,
            record.error,
            extra={"job_id": ledger.job_id, "attempt": ledger.attempt},
        )
        return None

    async def write_line(
        self,
        purpose: Purpose,
        try_number: int,
        prompt: str,
        answer: AnswerFormat[Draft],
        *,
        seed: int,
        ledger: Ledger,
    ) -> NoReturn:
        """Write the call as a line of the next batch; the job then waits for it."""
        async with ledger.call(
            purpose,
            self.provider,
            self.model,
            ceiling_usd=self.ceiling_usd,
            mode="batch",
            try_number=try_number,
        ) as record:
            request: dict[str, object] = {
                "model": self.model,
                "input": prompt,
                "text": {"format": answer.text_format()},
                "max_output_tokens": self.max_answer_tokens,
                "metadata": call_metadata(ledger, purpose, try_number, seed),
            }
            await ledger.batched(
                record, custom_id(ledger, purpose, try_number), self.model, request
            )
            raise CallDeferred(record.call_id)
