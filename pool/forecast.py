"""What a domain needs: its supply, the demand over the lead time, and the deficit to order.

Pure arithmetic over what `pool.stats` counts in the tables, so each rule is tested alone.

Supply counts serves: those the approved stock can serve (the shares left on the live variants
of approved missions, each mission's up to its own serves left, but of a variant whose
renderings cannot be made only what its ready renderings hold), plus the variant jobs under way,
each worth a variant's serves, plus the missions in review and in flight, each weighted by its
chance of becoming an approved mission and worth the serves a new mission brings once its
variants are planted (the replenisher plants them before it orders missions). Demand is the
serve rate over the lead time (p90, from a job's creation to its mission's approval) plus
safety stock. The deficit is the larger of two needs, in
generations to order: the serves that demand takes before an order placed now is ready, and
a floor of distinct missions (the domain map's `target`), since a user is never served the
same mission twice.
"""

from __future__ import annotations

import math
from datetime import timedelta

import msgspec

from core.domains import Domain

# Demand: the busier of the last hour and the last day, so a burst counts at once and a quiet
# night does not forget the daytime rate.
SHORT_DEMAND_WINDOW = timedelta(hours=1)
LONG_DEMAND_WINDOW = timedelta(days=1)
# Pass rates and lead times: a day of history spans the reviewers' working hours.
HISTORY = timedelta(days=1)
# Without history, a generation makes a mission 9 times in 10 and a reviewer approves 8 in
# 10; the priors weigh as much as this many observations, so a few outcomes move the rate
# without swinging it.
PRIOR_GENERATED = 0.9
PRIOR_APPROVED = 0.8
PRIOR_WEIGHT = 4
# A pass rate below this means something is broken (a provider outage, a missing tool):
# ordering 1/rate more would multiply the waste, not the stock.
PASS_RATE_FLOOR = 0.2
# A p90 needs a few approvals to mean anything; until then, a prior by how the domain is
# reviewed: a person takes hours, a proof minutes.
LEAD_TIME_MIN_SAMPLES = 5
PRIOR_LEAD_TIME = {"human": timedelta(hours=2), "proof": timedelta(minutes=10)}
# Safety stock for serves arriving at random (Poisson: the variance is the mean): z = 1.65
# covers 95 % of lead times.
SAFETY_Z = 1.65
# Rounding noise must not order a generation for a gap of 1e-12 missions.
_EPSILON = 1e-9


class Measured(msgspec.Struct, frozen=True, kw_only=True):
    """One domain's pool and recent history, counted from the tables."""

    approved: int
    remaining_serves: int
    # Of the remaining serves, those ready renderings hold now, and those the live variants'
    # shares cover once rendered (without the variants whose renderings cannot be made).
    servable_serves: int
    stock_serves: int
    live_variants: int
    renderings_ready: int
    variant_jobs: int
    rendering_jobs: int
    awaiting_review: int
    pending: int
    generating: int
    serves_in_short_window: int
    serves_in_long_window: int
    # Over HISTORY: generations that made a mission or failed, and review outcomes.
    generated: int
    generation_failures: int
    approvals: int
    rejections: int
    lead_time_p90_s: float | None
    lead_time_samples: int


class Forecast(msgspec.Struct, frozen=True, kw_only=True):
    # The chance that a generation ordered now becomes an approved mission.
    pass_rate: float
    serve_rate_per_hour: float
    lead_time_p90_s: float
    # Expected approved missions, and the serves they hold, once the pipeline has drained.
    supply_missions: float
    supply_serves: float
    # Serves that demand takes over the lead time, with safety stock.
    demand_serves: float
    # How long what can be served now lasts at the current serve rate; None when nobody is
    # served.
    time_to_empty_s: float | None
    # Supply over the larger need (1: just enough); None when the domain needs nothing.
    cover: float | None
    # Generations to order now.
    deficit: int


def smoothed(successes: int, failures: int, prior: float) -> float:
    """The observed success rate, pulled towards the prior by PRIOR_WEIGHT observations."""
    return (successes + PRIOR_WEIGHT * prior) / (successes + failures + PRIOR_WEIGHT)


def serve_rate_per_second(measured: Measured) -> float:
    return max(
        measured.serves_in_short_window / SHORT_DEMAND_WINDOW.total_seconds(),
        measured.serves_in_long_window / LONG_DEMAND_WINDOW.total_seconds(),
    )


def lead_time_seconds(domain: Domain, measured: Measured) -> float:
    if measured.lead_time_p90_s is None or measured.lead_time_samples < LEAD_TIME_MIN_SAMPLES:
        return PRIOR_LEAD_TIME[domain.review].total_seconds()
    return measured.lead_time_p90_s


def serves_per_new_mission(domain: Domain) -> float:
    """The mean serve limit of a new mission: the jitter lowers it by 0 to a tenth, evenly."""
    if not domain.retire_jitter:
        return float(domain.retire_after)
    return domain.retire_after - (domain.retire_after // 10) / 2


def demand_over(rate_per_second: float, lead_time_s: float) -> float:
    expected = rate_per_second * lead_time_s
    return expected + SAFETY_Z * math.sqrt(expected)


def forecast(domain: Domain, measured: Measured) -> Forecast:
    approval = smoothed(measured.approvals, measured.rejections, PRIOR_APPROVED)
    generation = smoothed(measured.generated, measured.generation_failures, PRIOR_GENERATED)
    pass_rate = approval * generation
    rate = serve_rate_per_second(measured)
    lead_time = lead_time_seconds(domain, measured)
    per_mission = serves_per_new_mission(domain)

    coming = measured.awaiting_review * approval + (measured.pending + measured.generating) * (
        pass_rate
    )
    supply_missions = measured.approved + coming
    per_variant = domain.variant_serves(domain.retire_after)
    variants_coming = measured.variant_jobs * generation * per_variant
    supply_serves = measured.stock_serves + variants_coming + coming * per_mission
    demand_serves = demand_over(rate, lead_time)

    # Each generation ordered now adds pass_rate missions, and their serves, in expectation.
    ordering_rate = max(pass_rate, PASS_RATE_FLOOR)
    for_the_floor = _generations(domain.target - supply_missions, ordering_rate)
    for_demand = _generations(demand_serves - supply_serves, ordering_rate * per_mission)
    needs = [supply_missions / domain.target] if domain.target else []
    needs += [supply_serves / demand_serves] if demand_serves else []
    return Forecast(
        pass_rate=pass_rate,
        serve_rate_per_hour=rate * 3600,
        lead_time_p90_s=lead_time,
        supply_missions=supply_missions,
        supply_serves=supply_serves,
        demand_serves=demand_serves,
        time_to_empty_s=measured.servable_serves / rate if rate else None,
        cover=min(needs, default=None),
        deficit=max(for_the_floor, for_demand),
    )


def _generations(gap: float, each: float) -> int:
    return max(0, math.ceil(gap / each - _EPSILON))
