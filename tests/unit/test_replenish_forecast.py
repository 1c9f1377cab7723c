"""The replenishment forecast's arithmetic: pass rates with priors, demand over the lead time
with safety stock, the floor of distinct missions, and the deficit in generations."""

import math

import msgspec
import pytest

from core.domains import Domain
from pool.forecast import (
    PASS_RATE_FLOOR,
    PRIOR_APPROVED,
    PRIOR_GENERATED,
    Measured,
    demand_over,
    forecast,
    lead_time_seconds,
    serve_rate_per_second,
    serves_per_new_mission,
    smoothed,
)

PRIOR_PASS = PRIOR_APPROVED * PRIOR_GENERATED  # 0.72

EMPTY = Measured(
    approved=0,
    remaining_serves=0,
    servable_serves=0,
    stock_serves=0,
    live_variants=0,
    renderings_ready=0,
    variant_jobs=0,
    rendering_jobs=0,
    awaiting_review=0,
    pending=0,
    generating=0,
    serves_in_short_window=0,
    serves_in_long_window=0,
    generated=0,
    generation_failures=0,
    approvals=0,
    rejections=0,
    lead_time_p90_s=None,
    lead_time_samples=0,
)


def domain(target: int = 8, retire_after: int = 100, *, jitter: bool = False) -> Domain:
    return Domain(
        name="python-backend",
        kind="technical",
        language="python",
        target=target,
        retire_after=retire_after,
        retire_jitter=jitter,
    )


def measured(**counts: object) -> Measured:
    return msgspec.structs.replace(EMPTY, **counts)


def test_without_history_the_priors_decide_and_a_few_outcomes_move_them() -> None:
    assert smoothed(0, 0, 0.8) == pytest.approx(0.8)
    assert smoothed(2, 0, 0.8) == pytest.approx((2 + 3.2) / 6)  # 0.867
    assert smoothed(0, 2, 0.8) == pytest.approx(3.2 / 6)  # 0.533
    assert smoothed(1000, 0, 0.8) == pytest.approx(1.0, abs=0.01)
    assert forecast(domain(), EMPTY).pass_rate == pytest.approx(PRIOR_PASS)


def test_an_empty_domain_orders_its_target_divided_by_the_pass_rate() -> None:
    outlook = forecast(domain(target=8), EMPTY)
    assert outlook.deficit == math.ceil(8 / PRIOR_PASS) == 12
    assert outlook.supply_missions == 0
    assert outlook.time_to_empty_s is None, "nobody is served: it never empties"
    assert outlook.cover == 0


def test_missions_in_review_and_in_flight_count_weighted_by_their_chance_to_pass() -> None:
    outlook = forecast(domain(target=8), measured(approved=4, awaiting_review=2, pending=3))
    # 4 approved + 2 x 0.8 + 3 x 0.72 = 7.76 expected: 0.24 short, one generation.
    assert outlook.supply_missions == pytest.approx(7.76)
    assert outlook.deficit == 1
    assert forecast(domain(target=7), measured(approved=7)).deficit == 0, "exactly the target"


def test_the_demand_over_the_lead_time_with_safety_stock_can_exceed_the_floor() -> None:
    busy = measured(
        approved=8,
        remaining_serves=200,
        servable_serves=200,
        stock_serves=200,
        serves_in_short_window=600,  # 600 serves an hour
        lead_time_p90_s=7200.0,
        lead_time_samples=10,
    )
    outlook = forecast(domain(target=8), busy)
    assert outlook.serve_rate_per_hour == pytest.approx(600)
    assert outlook.lead_time_p90_s == 7200
    # 1200 serves over two hours, plus 1.65 x sqrt(1200) = 57 of safety stock.
    assert outlook.demand_serves == pytest.approx(1200 + 1.65 * math.sqrt(1200))
    assert outlook.time_to_empty_s == pytest.approx(1200), "200 serves at 600 an hour: 20 min"
    # 1057 serves short, at 100 serves x 0.72 per generation.
    assert outlook.deficit == math.ceil((outlook.demand_serves - 200) / (100 * PRIOR_PASS)) == 15


def test_demand_is_the_busier_of_the_last_hour_and_the_last_day() -> None:
    burst = measured(serves_in_short_window=30, serves_in_long_window=30)
    steady = measured(serves_in_short_window=0, serves_in_long_window=480)
    assert serve_rate_per_second(burst) * 3600 == pytest.approx(30)
    assert serve_rate_per_second(steady) * 3600 == pytest.approx(20), "a quiet hour at night"
    assert demand_over(0, 3600) == 0


def test_the_lead_time_is_measured_once_there_are_enough_approvals() -> None:
    human = domain()
    proof = msgspec.structs.replace(human, review="proof")
    assert lead_time_seconds(human, EMPTY) == 7200
    assert lead_time_seconds(proof, EMPTY) == 600
    few = measured(lead_time_p90_s=60.0, lead_time_samples=4)
    enough = measured(lead_time_p90_s=60.0, lead_time_samples=5)
    assert lead_time_seconds(human, few) == 7200
    assert lead_time_seconds(human, enough) == 60


def test_a_new_missions_serves_are_its_mean_jittered_limit() -> None:
    assert serves_per_new_mission(domain(retire_after=100)) == 100
    # Jitter lowers the limit by 0 to 10, evenly: 95 on average.
    assert serves_per_new_mission(domain(retire_after=100, jitter=True)) == 95
    assert serves_per_new_mission(domain(retire_after=5, jitter=True)) == 5


def test_a_broken_pipeline_does_not_multiply_the_orders() -> None:
    broken = measured(generation_failures=1000)
    outlook = forecast(domain(target=8), broken)
    assert outlook.pass_rate < 0.01
    assert outlook.deficit == math.ceil(8 / PASS_RATE_FLOOR) == 40


def test_a_domain_with_no_target_and_no_demand_needs_nothing() -> None:
    outlook = forecast(domain(target=0), EMPTY)
    assert (outlook.deficit, outlook.cover) == (0, None)


def test_only_the_serves_that_live_variants_cover_are_supply_and_variant_jobs_add_theirs() -> None:
    # 4 missions of 100 serves left, each with one bug of 5 serves: 20 can be served now.
    short = measured(
        approved=4, remaining_serves=400, servable_serves=20, stock_serves=20, live_variants=4
    )
    busy = {"serves_in_short_window": 60, "lead_time_p90_s": 3600.0, "lead_time_samples": 10}
    outlook = forecast(domain(target=4), msgspec.structs.replace(short, **busy))
    assert outlook.supply_serves == pytest.approx(20)
    assert outlook.time_to_empty_s == pytest.approx(20 * 60), "20 serves at 60 an hour"
    # Ten variant jobs under way, each a bug of 5 serves at the generation prior.
    planting = msgspec.structs.replace(short, variant_jobs=10, **busy)
    assert forecast(domain(target=4), planting).supply_serves == pytest.approx(
        20 + 10 * PRIOR_GENERATED * 5
    )


def test_serves_not_yet_rendered_are_supply_and_those_that_cannot_be_rendered_are_not() -> None:
    busy = {"serves_in_short_window": 60, "lead_time_p90_s": 3600.0, "lead_time_samples": 10}
    # 4 missions of 25 serves, 5 bugs of 5 each: 4 renderings ready, the rest to be rendered.
    rendering = measured(
        approved=4, remaining_serves=100, servable_serves=4, stock_serves=100, **busy
    )
    outlook = forecast(domain(target=4, retire_after=25), rendering)
    assert outlook.supply_serves == pytest.approx(100)
    assert outlook.time_to_empty_s == pytest.approx(4 * 60), "what is ready now runs out first"
    assert outlook.deficit == 0
    # No rendering can be made: only the 4 ready serves are supply, so missions are ordered.
    stuck = msgspec.structs.replace(rendering, stock_serves=4)
    assert forecast(domain(target=4, retire_after=25), stuck).deficit > 0
