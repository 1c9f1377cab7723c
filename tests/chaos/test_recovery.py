"""The chaos suite's recovery figures on series written by hand: a stop that completions never
recover from, or a job left generating past the bound, must show."""

from __future__ import annotations

import pytest

from tests.chaos.recovery import Recovery, back_to_rate, oldest_generating
from tests.chaos.sampler import Oldest


def ended_at(rates: list[tuple[float, float]], until: float) -> list[tuple[float, int]]:
    """Samples every 0.1 s of how many jobs had ended, at `rates`: (from when, jobs per second)."""
    samples, count = [], 0.0
    for step in range(round(until * 10) + 1):
        at = step / 10
        samples.append((at, int(count)))
        count += next(rate for since, rate in reversed(rates) if since <= at) * 0.1
    return samples


def test_completions_back_to_the_rate_at_the_end_of_the_first_full_window() -> None:
    # 10 jobs/s, none from 5 s to 8 s (the faults stop at 6 s), then 12 jobs/s.
    ended = ended_at([(0, 10), (5, 0), (8, 12)], until=20)

    back = back_to_rate(ended, since=6, rate=8, window=2)

    # The first 2 s with 16 jobs ended start at 7.4 s (12 jobs/s for 1.4 s of them): 3.4 s
    # after the stop.
    assert back == pytest.approx(3.4)


def test_completions_before_the_stop_do_not_count() -> None:
    # A fast start, then a trickle from the stop on: never back to the rate.
    ended = ended_at([(0, 50), (6, 2)], until=20)

    assert back_to_rate(ended, since=6, rate=8, window=2) is None


def test_completions_that_never_stopped_are_back_after_one_window() -> None:
    ended = ended_at([(0, 10)], until=20)

    assert back_to_rate(ended, since=6, rate=8, window=2) == pytest.approx(2.0)


def test_the_oldest_generating_job_only_within_the_check() -> None:
    # Old jobs during the faults and after the next fault began; young ones in between.
    oldest = [
        Oldest(1.0, 9.0, 1),
        Oldest(5.0, 0.4, 2),
        Oldest(6.0, 1.2, 3),
        Oldest(7.5, 0.3, 4),
        Oldest(8.0, 30.0, 5),
    ]

    assert oldest_generating(oldest, since=5.0, until=8.0) == Oldest(6.0, 1.2, 3)
    assert oldest_generating(oldest, since=7.6, until=8.0) is None


def test_a_recovery_assessed_on_both_series() -> None:
    recovery = Recovery("restart", began_at=5.0, stopped_at=6.0, offered=10.0)
    oldest = [
        Oldest(step / 10, 5.0, 7) if step <= 96 else Oldest(step / 10, 0.5, 8)
        for step in range(200)
    ]

    recovery.assess(
        oldest,
        ended_at([(0, 10)], until=20),
        bound=3.5,
        share=0.8,
        window=2,
        ended_by=20.0,
    )

    # Job 7, 5 s old until 9.6 s: still there when the check began, 3.5 s after the stop.
    assert recovery.oldest == Oldest(9.5, 5.0, 7)
    assert recovery.during == pytest.approx(10)
    assert recovery.back_in == pytest.approx(2.0)
