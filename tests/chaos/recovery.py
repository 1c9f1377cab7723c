"""How the system came back once a fault phase stopped (the sessions terminated, the PostgreSQL
restart), read from the sampler's series: how old the oldest generating job was once the
reclaim bound had passed, and how soon completions were back to the rate the load offered
before the fault."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.chaos.sampler import Oldest


@dataclass
class Recovery:
    fault: str
    began_at: float
    stopped_at: float
    # Jobs per second the load offered just before the fault: what completions must come back
    # to (a share of), rather than the plan, which a load generator on shared cores may lag.
    offered: float
    # The stuck check ends when the next fault begins (or the run ends).
    until: float | None = None
    # The figures, once assessed: jobs ended per second while the faults went on, the oldest
    # generating job in the stuck check, and the seconds from the stop until completions were
    # back to the rate (None: never seen).
    during: float | None = None
    oldest: Oldest | None = None
    back_in: float | None = None

    def assess(
        self,
        oldest: Sequence[Oldest],
        ended: Sequence[tuple[float, int]],
        *,
        bound: float,
        share: float,
        window: float,
        ended_by: float,
    ) -> None:
        until = self.until if self.until is not None else ended_by
        self.during = ended_per_second(ended, self.began_at, self.stopped_at)
        self.oldest = oldest_generating(oldest, self.stopped_at + bound, until)
        self.back_in = back_to_rate(ended, self.stopped_at, share * self.offered, window)


def oldest_generating(oldest: Sequence[Oldest], since: float, until: float) -> Oldest | None:
    """The sample from `since` until `until` whose oldest generating job was the oldest; None
    if no sample was taken then."""
    return max(
        (sample for sample in oldest if since <= sample.at < until),
        key=lambda sample: sample.age,
        default=None,
    )


def ended_per_second(ended: Sequence[tuple[float, int]], start: float, end: float) -> float | None:
    """Jobs ended per second between the last sample up to `start` and the last up to `end`;
    None if there are not two such samples."""
    first = next(((at, count) for at, count in reversed(ended) if at <= start), None)
    last = next(((at, count) for at, count in reversed(ended) if at <= end), None)
    if first is None or last is None or last[0] <= first[0]:
        return None
    return (last[1] - first[1]) / (last[0] - first[0])


def back_to_rate(
    ended: Sequence[tuple[float, int]], since: float, rate: float, window: float
) -> float | None:
    """Seconds from `since` to the end of the first span of at least `window` seconds, between
    two samples taken from `since` on, over which jobs ended at `rate` per second or more;
    None if there is none."""
    for index, (start, before) in enumerate(ended):
        if start < since:
            continue
        end, after = next(
            ((at, count) for at, count in ended[index + 1 :] if at - start >= window), (None, 0)
        )
        if end is None:
            return None
        if after - before >= rate * (end - start):
            return end - since
    return None
