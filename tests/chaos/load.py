"""The candidate app's side of a chaos run: jobs offered to the API processes over HTTP at an
even pace, two per user, each under an idempotency key of its own and offered again under that
key, to another process, until one accepts it (a shed, an outage or a process stopping is
waited out). Every tenth job is offered once more after it was accepted: the answer must name
the same job."""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

# Retry-After says 30 s for a full queue; the chaos waits much less, to keep the queue full.
LONGEST_WAIT_SECONDS = 0.5
# Statuses that say "try again later"; anything else unexpected is a fault of the run.
RETRIED = {429, 503}


@dataclass
class Offer:
    key: str
    user_id: str
    track: str


@dataclass
class Load:
    urls: Sequence[str]
    api_key: str
    offers: Sequence[Offer]
    over_seconds: float
    concurrency: int = 8
    repeat_every: int = 10
    seed: int = 0
    # Idempotency key -> the job id the API answered with.
    accepted: dict[str, str] = field(default_factory=dict)
    # When each job was first sent, and when each was accepted (the first time).
    offered_at: list[float] = field(default_factory=list)
    accepted_at: list[float] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    started: float | None = None

    async def run(self) -> None:
        """A client of each lane's own: one client's pool looks at every connection it holds on
        every request, which costs more than the requests once it holds dozens. The clients are
        made before the clock starts and share one TLS context: making one loads the CA bundle,
        which on a loaded machine blocks the loop for most of a second."""
        headers = {"Authorization": f"Bearer {self.api_key}"}
        tls = ssl.create_default_context()
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(headers=headers, timeout=30, verify=tls)
                )
                for _ in range(self.concurrency)
            ]
            self.started = started = time.monotonic()
            due: asyncio.Queue[tuple[int, Offer]] = asyncio.Queue()
            for index, offer in enumerate(self.offers):
                due.put_nowait((index, offer))
            await asyncio.gather(
                *(
                    self._offer_all(client, due, started, lane)
                    for lane, client in enumerate(clients)
                )
            )

    async def _offer_all(
        self,
        client: httpx.AsyncClient,
        due: asyncio.Queue[tuple[int, Offer]],
        started: float,
        lane: int,
    ) -> None:
        rng = random.Random(f"{self.seed}:{lane}")
        pace = self.over_seconds / max(1, len(self.offers))
        while not due.empty():
            index, offer = due.get_nowait()
            await asyncio.sleep(max(0.0, started + index * pace - time.monotonic()))
            self.offered_at.append(time.monotonic())
            job_id = await self._offer(client, index, offer, rng)
            if job_id is None:
                continue
            self._accept(offer, job_id)
            if index % self.repeat_every == 0:
                again = await self._offer(client, index + 1, offer, rng)
                if again is not None:
                    self._accept(offer, again)

    async def _offer(
        self, client: httpx.AsyncClient, index: int, offer: Offer, rng: random.Random
    ) -> str | None:
        """The id of the job an API process accepted the offer as, trying until one does."""
        for attempt in range(10_000):
            url = self.urls[(index + attempt) % len(self.urls)]
            try:
                answer = await client.post(
                    f"{url}/v1/jobs",
                    json={"user_id": offer.user_id, "track": offer.track},
                    headers={"Idempotency-Key": offer.key},
                )
            except httpx.TransportError as error:
                self.answers[type(error).__name__] += 1
                await asyncio.sleep(rng.uniform(0.05, 0.2))
                continue
            self.answers[str(answer.status_code)] += 1
            if answer.status_code in RETRIED:
                wait = float(answer.headers.get("retry-after", LONGEST_WAIT_SECONDS))
                await asyncio.sleep(rng.uniform(0.5, 1) * min(wait, LONGEST_WAIT_SECONDS))
                continue
            if answer.status_code not in (200, 202):
                self.problems.append(f"{offer.key}: {answer.status_code} {answer.text}")
                return None
            return str(answer.json()["job"]["id"])
        self.problems.append(f"{offer.key}: never accepted")
        return None

    def _accept(self, offer: Offer, job_id: str) -> None:
        previous = self.accepted.get(offer.key)
        if previous is None:
            self.accepted[offer.key] = job_id
            self.accepted_at.append(time.monotonic())
        elif previous != job_id:
            self.problems.append(f"{offer.key}: accepted as job {previous}, then as {job_id}")

    def pace(self, until: float, since: float, seconds: float) -> Pace:
        """Jobs per second offered and accepted in the `seconds` up to `until` (from the start
        of the load at most), and accepted in the `seconds` from `since` on."""
        assert self.started is not None, "the load has run"
        before = max(until - seconds, self.started)
        return Pace(
            before=until - before,
            after=seconds,
            offered_before=_per_second(self.offered_at, before, until),
            accepted_before=_per_second(self.accepted_at, before, until),
            accepted_after=_per_second(self.accepted_at, since, since + seconds),
        )


@dataclass
class Pace:
    # The windows' lengths, in seconds.
    before: float
    after: float
    offered_before: float
    accepted_before: float
    accepted_after: float


def _per_second(moments: Sequence[float], start: float, end: float) -> float:
    if end <= start:
        return 0.0  # the load has only just begun
    return sum(start <= moment < end for moment in moments) / (end - start)
