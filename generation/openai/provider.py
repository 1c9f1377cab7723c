"""The openai provider: a model writes the mission and plants the bug, through the official SDK.

Each try of a call is a ledger row under the job's attempt, written before the request goes
out. The SDK's own retries are off (it would retry read timeouts and every 5xx, which may
have billed); ours retry only what is known not to have billed (see failures.py). Calls go out
as background responses that outlive their worker (background.py, WARMPOOL_OPENAI_CALLS
`background`), or as chat completions answered on their connection (`direct`); those of the
replenish lane, with WARMPOOL_BATCH `replenish`, as lines of a batch (batch_calls.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Literal, TypeVar

import asyncpg
import msgspec
import openai
from openai.types.chat import ChatCompletion

from core.domains import Domain
from generation.drafts import MissionDraft, SabotageDraft
from generation.ledger import CallRecord, Ledger, Purpose
from generation.openai import checks, prompting
from generation.openai.answers import AnswerFormat, UnusableAnswer
from generation.openai.background import BackgroundCalls
from generation.openai.batch_calls import BatchCalls
from generation.openai.batches import BatchLane
from generation.openai.failures import RetryPolicy, book_failed_request
from generation.openai.prices import PriceTable, Rates
from generation.provider import ProviderError

# An answer is cut off at this many tokens (and then refused as truncated), so no call can
# cost more than a prompt of PROMPT_TOKENS_CEILING tokens plus this: the spend budget
# reserves that much per call. The largest prompt, the sabotage one, carries a mission the
# model wrote, so it is bounded by an answer plus the prompt's own text.
MAX_ANSWER_TOKENS = 16_000
PROMPT_TOKENS_CEILING = MAX_ANSWER_TOKENS + 4_000


def worst_case_cost_usd(price: Rates, calls: int) -> Decimal:
    return calls * price.cost(PROMPT_TOKENS_CEILING, MAX_ANSWER_TOKENS)


log = logging.getLogger(__name__)

Draft = TypeVar("Draft", bound=msgspec.Struct)
Calls = Literal["background", "direct"]
Batching = Literal["off", "replenish"]


class OpenAIProvider:
    name = "openai"
    prompt_version = prompting.PROMPT_VERSION

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        prices: PriceTable,
        timeout_seconds: float,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        calls: Calls = "direct",
        batch: Batching = "off",
    ) -> None:
        self.model = model
        self.calls = calls
        self._price = prices.for_model(model)
        self._timeout_seconds = timeout_seconds
        self._retry = retry or RetryPolicy()
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0
        )
        self.background = BackgroundCalls(
            self._client,
            provider=self.name,
            model=model,
            price=self._price,
            ceiling_usd=worst_case_cost_usd(self._price, 1),
            max_answer_tokens=MAX_ANSWER_TOKENS,
            timeout_seconds=timeout_seconds,
            retry=self._retry,
        )
        self.abandon = self.background.abandon
        # Batch calls are read whatever the setting (a job may wait for one written before
        # batching was turned off); `batch` says whether the replenish lane writes new ones.
        self.batch = batch
        self.batch_rates = (
            prices.batch_for_model(model) if batch != "off" else self._price.batch or self._price
        )
        self.batches = BatchCalls(
            provider=self.name,
            model=model,
            rates=self.batch_rates,
            ceiling_usd=worst_case_cost_usd(self.batch_rates, 1),
            max_answer_tokens=MAX_ANSWER_TOKENS,
        )
        self._mission = AnswerFormat("mission", MissionDraft)
        self._sabotage = AnswerFormat("sabotage", SabotageDraft)

    async def write_mission(self, domain: Domain, *, seed: int, ledger: Ledger) -> MissionDraft:
        return await self._ask(
            "generate",
            1,
            prompting.mission_prompt(domain, seed=seed),
            self._mission,
            lambda draft: checks.check_mission(domain, draft),
            seed=seed,
            ledger=ledger,
        )

    async def plant_bug(
        self,
        domain: Domain,
        mission: MissionDraft,
        *,
        seed: int,
        try_number: int,
        ledger: Ledger,
    ) -> SabotageDraft:
        return await self._ask(
            "sabotage",
            try_number,
            prompting.sabotage_prompt(domain, mission, try_number=try_number),
            self._sabotage,
            lambda draft: checks.check_sabotage(domain, mission, draft),
            seed=seed,
            ledger=ledger,
        )

    def worst_case_cost_usd(self, calls: int) -> Decimal:
        return worst_case_cost_usd(self._price, calls)

    def batch_lane(self, db: asyncpg.Pool, *, size: int, wait_seconds: float) -> BatchLane:
        """The batches of this provider's lines, submitted and polled one pass at a time."""
        return BatchLane(
            db,
            self._client,
            rates=self.batch_rates,
            ceiling_usd=worst_case_cost_usd(self.batch_rates, 1),
            size=size,
            wait_seconds=wait_seconds,
        )

    async def close(self) -> None:
        await self._client.close()

    async def _ask(
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
        taken = await ledger.take_over(purpose, try_number)
        if taken is not None:
            # An earlier attempt's call of this purpose and try, as it was made.
            calls = self.batches if taken.mode == "batch" else self.background
            answered = await calls.answered(taken, answer, accept, ledger)
            if answered is not None:
                return answered
        if self.batch == "replenish" and ledger.lane == "replenish":
            await self.batches.write_line(
                purpose, try_number, prompt, answer, seed=seed, ledger=ledger
            )
        if self.calls == "background":
            return await self.background.create(
                purpose, try_number, prompt, answer, accept, seed=seed, ledger=ledger
            )
        tries = 0
        while True:
            tries += 1
            async with ledger.call(
                purpose,
                self.name,
                self.model,
                ceiling_usd=worst_case_cost_usd(self._price, 1),
                try_number=try_number,
            ) as record:
                try:
                    completion = await self._client.chat.completions.create(
                        model=self.model,
                        messages=[{"role": "user", "content": prompt}],
                        response_format=answer.response_format(),
                        seed=seed,
                        max_completion_tokens=MAX_ANSWER_TOKENS,
                    )
                except openai.APIError as error:
                    failure = book_failed_request(
                        error,
                        record,
                        timeout_seconds=self._timeout_seconds,
                        tries=tries,
                        ledger=ledger,
                    )
                else:
                    return self._read(completion, record, answer, accept)
            await self._retry.sleep(self._retry.wait(failure, tries))

    def _read(
        self,
        completion: ChatCompletion,
        record: CallRecord,
        answer: AnswerFormat[Draft],
        accept: Callable[[Draft], Draft],
    ) -> Draft:
        usage = completion.usage
        if usage is None:
            log.warning("the model API reported no token usage; the call is booked at its ceiling")
        else:
            record.input_tokens = usage.prompt_tokens
            record.output_tokens = usage.completion_tokens
            record.cost_usd = self._price.cost(usage.prompt_tokens, usage.completion_tokens)
            record.priced = True
        try:
            return accept(answer.read(completion))
        except UnusableAnswer as unusable:
            record.outcome, record.error = unusable.outcome, str(unusable)
            raise ProviderError(str(unusable)) from None
