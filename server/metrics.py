"""What GET /metrics exposes: figures read from the tables at scrape time, which every API
process reports alike (aggregate them with max, not sum), and the counters of what only this
process saw (`generation.metrics`). Each HELP text says which of the two a metric is.

prometheus-client collects synchronously: the tables are read first, in one read-only
snapshot, and `Scrape` only turns that snapshot into metric families. No figure reads the
instances or the ledger row by row: serves are summed from the missions' counts, spend from the
ledger's totals. A scrape must never hurt serving, however many arrive (`Scraping`): the
process's scrapes share one snapshot, read at most every WARMPOOL_METRICS_REFRESH_SECONDS on a
connection of its own (`server.snapshots`), and they are answered one at a time, spaced apart.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar, get_args

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder

from core.domains import DomainMap
from core.sql import Connection
from generation import gradings, ledger, queue_stats
from generation.budget import Budget, BudgetStatus
from generation.ledger import Outcome
from generation.openai import prices
from generation.queue_stats import LaneStats, QueueStats
from generation.spend import Spend
from pool import stats
from server.pacing import Pacing
from server.settings import Settings
from server.snapshots import Snapshots

DATABASE = "Database, read at scrape time"
CONFIGURED = "Configuration of this process"
# A ledger row's outcome until its call ends; forever, if its process died mid-call.
UNFINISHED = "started"
NOTHING_SPENT = Spend(
    llm_calls=0, input_tokens=0, output_tokens=0, cost_usd=0.0, resumed_calls=0, saved_usd=0.0
)
# A process answers at most one scrape per this many seconds, and refuses at most one (a
# scrape without the token) as often: plenty for any number of Prometheus servers, and a bound
# on what a storm of scrapes can take from serving.
SCRAPE_SPACING_SECONDS = 0.05

Row = TypeVar("Row")


class Figure(NamedTuple, Generic[Row]):
    """One metric: its name, what it measures (its HELP after the source), how to read it from
    a row of the snapshot, and where the value comes from."""

    name: str
    what: str
    value: Callable[[Row], float]
    source: str = DATABASE


LANE_GAUGES: Sequence[Figure[LaneStats]] = (
    Figure(
        "warmpool_queue_pending", "jobs waiting for a generation slot", lambda lane: lane.pending
    ),
    Figure(
        "warmpool_queue_generating",
        "generations in flight, all workers together",
        lambda lane: lane.generating,
    ),
    Figure(
        "warmpool_queue_oldest_pending_age_seconds",
        "how long the oldest pending job has waited (0 when none is pending)",
        lambda lane: lane.oldest_pending_age_s or 0.0,
    ),
)
QUEUE_GAUGES: Sequence[Figure[QueueStats]] = (
    Figure(
        "warmpool_queue_global_cap",
        "the most generations in flight, all processes together (WARMPOOL_GLOBAL_CAP)",
        lambda queued: queued.global_cap,
        CONFIGURED,
    ),
    Figure(
        "warmpool_queue_max_pending",
        "the pending depth at which new work is shed (WARMPOOL_MAX_PENDING)",
        lambda queued: queued.max_pending,
        CONFIGURED,
    ),
)
DOMAIN_GAUGES: Sequence[Figure[stats.DomainPool]] = (
    Figure(
        "warmpool_pool_approved_missions",
        "approved, unretired missions ready to serve",
        lambda domain: domain.approved,
    ),
    Figure(
        "warmpool_pool_remaining_serves",
        "serves left on the approved missions",
        lambda domain: domain.remaining_serves,
    ),
    Figure(
        "warmpool_pool_variants_ready",
        "live bug variants of the approved missions",
        lambda domain: domain.live_variants,
    ),
    Figure(
        "warmpool_pool_renderings_ready",
        "ready renderings of those variants with a serve left: what can be served now",
        lambda domain: domain.renderings_ready,
    ),
    Figure(
        "warmpool_pool_cost_per_served_instance_usd",
        "the model spend of the domain's jobs over its serves, ever (NaN before a serve)",
        lambda domain: (
            math.nan
            if domain.cost_per_served_instance_usd is None
            else domain.cost_per_served_instance_usd
        ),
    ),
    Figure(
        "warmpool_pool_awaiting_review",
        "missions awaiting a reviewer's decision",
        lambda domain: domain.awaiting_review,
    ),
    Figure(
        "warmpool_pool_target",
        "the approved missions the domain map asks to keep ready",
        lambda domain: domain.target,
        CONFIGURED,
    ),
    Figure(
        "warmpool_pool_deficit",
        "generations the replenishment forecast lacks now",
        lambda domain: domain.forecast.deficit,
    ),
    Figure(
        "warmpool_pool_domain_enabled",
        "1 while some live worker (its row in the workers table heartbeating within "
        "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS) can make the domain's missions, else 0",
        lambda domain: domain.enabled,
    ),
)
SERVES: Figure[int] = Figure("warmpool_serves", "instances served, ever", lambda count: count)
LEDGER_COUNTERS: Sequence[Figure[Spend]] = (
    Figure("warmpool_llm_calls", "model calls that ended", lambda spent: spent.llm_calls),
    Figure(
        "warmpool_llm_input_tokens",
        "input tokens of the model calls that ended",
        lambda spent: spent.input_tokens,
    ),
    Figure(
        "warmpool_llm_output_tokens",
        "output tokens of the model calls that ended",
        lambda spent: spent.output_tokens,
    ),
    Figure(
        "warmpool_llm_cost_usd",
        "what the model calls that ended cost, in US dollars",
        lambda spent: spent.cost_usd,
    ),
)
MODE_COUNTERS: Sequence[Figure[Spend]] = (
    Figure(
        "warmpool_llm_mode_calls",
        "model calls (under way ones too) by how they went out (WARMPOOL_OPENAI_CALLS)",
        lambda spent: spent.llm_calls,
    ),
    Figure(
        "warmpool_llm_mode_cost_usd",
        "what the model calls cost, in US dollars, by how they went out",
        lambda spent: spent.cost_usd,
    ),
    Figure(
        "warmpool_llm_resumed_calls",
        "model calls taken over from an earlier attempt of their job instead of paid again",
        lambda spent: spent.resumed_calls,
    ),
    Figure(
        "warmpool_llm_resumed_saved_usd",
        "what the calls taken over would have cost paid again, in US dollars",
        lambda spent: spent.saved_usd,
    ),
)
UNFINISHED_CALLS: Figure[Spend] = Figure(
    "warmpool_llm_calls_unfinished",
    "model calls under way, or whose process died mid-call (their cost is unknown)",
    lambda spent: spent.llm_calls,
)
BUDGET_GAUGES: Sequence[Figure[BudgetStatus]] = (
    Figure(
        "warmpool_budget_daily_usd",
        "the daily spend budget in US dollars (WARMPOOL_DAILY_BUDGET_USD)",
        lambda budget: budget.daily_usd,
        CONFIGURED,
    ),
    Figure(
        "warmpool_budget_spent_today_usd",
        "what the model calls started today (UTC) cost, in US dollars",
        lambda budget: budget.spent_today_usd,
    ),
    Figure(
        "warmpool_budget_reserved_usd",
        "what the generations in flight may still spend of their reservations, in US dollars",
        lambda budget: budget.reserved_usd,
    ),
    Figure(
        "warmpool_budget_remaining_usd",
        "the daily budget less today's spend and the reservations, in US dollars",
        lambda budget: budget.remaining_usd,
    ),
    Figure(
        "warmpool_budget_replenish_paused",
        "1 while the budget stops replenishment claims (what is left is the interactive "
        "reserve), else 0",
        lambda budget: budget.replenish_paused,
    ),
    Figure(
        "warmpool_budget_exhausted",
        "1 while the budget stops every claim until the UTC day ends, else 0",
        lambda budget: budget.exhausted,
    ),
)


BATCH_GAUGES: Sequence[Figure[stats.PoolView]] = (
    Figure(
        "warmpool_llm_batch_saved_usd",
        "what the model calls that went through a batch would have cost at their models' "
        "synchronous prices, less what they cost, in US dollars (WARMPOOL_BATCH)",
        lambda pool: pool.spend.saved_by_batch_usd,
    ),
    Figure(
        "warmpool_batches_open",
        "batches being submitted or under way at the provider",
        lambda pool: len(pool.batches.batches),
    ),
    Figure(
        "warmpool_batch_lines_queued",
        "model calls written as batch lines, waiting for a batch to go out in",
        lambda pool: pool.batches.queued_lines,
    ),
    Figure(
        "warmpool_jobs_waiting_for_batch",
        "jobs waiting in the queue, off every slot, for their batch line to be answered",
        lambda pool: pool.batches.waiting_jobs,
    ),
)


GRADING_GAUGES: Sequence[Figure[gradings.InFlight]] = (
    Figure(
        "warmpool_gradings_pending",
        "submissions waiting for a grading slot",
        lambda graded: graded.pending,
    ),
    Figure(
        "warmpool_gradings_running",
        "gradings running, all workers together",
        lambda graded: graded.running,
    ),
)


SIGNAL_COUNTERS: Sequence[Figure[gradings.DomainSignals]] = (
    Figure(
        "warmpool_submissions_graded",
        "candidates' submissions graded, ever",
        lambda signals: signals.graded,
    ),
    Figure(
        "warmpool_submissions_passed",
        "candidates' submissions that passed, ever",
        lambda signals: signals.passed,
    ),
    Figure(
        "warmpool_submissions_errored",
        "candidates' submissions whose grading judged no fix (an error), ever",
        lambda signals: signals.errored,
    ),
)
NO_SIGNALS = gradings.DomainSignals(graded=0, passed=0, errored=0)
PASS_TIMES = Figure[gradings.PassTimes](
    "warmpool_submission_time_to_pass_seconds",
    "time from an instance's serve to each passing submission, ever (a median per domain: "
    "histogram_quantile(0.5, ...))",
    lambda times: times.seconds,
)


@dataclass(frozen=True)
class Snapshot:
    queue: QueueStats
    pool_stats: stats.PoolView
    spend: ledger.LedgerTotals
    signals: dict[str, gradings.DomainSignals]
    pass_times: dict[str, gradings.PassTimes]
    gradings: gradings.InFlight


async def read_snapshot(
    connection: Connection, settings: Settings, domain_map: DomainMap, budget: Budget | None
) -> Snapshot:
    # One snapshot, so the queue, the pool and the ledger agree with each other.
    async with connection.transaction(isolation="repeatable_read", readonly=True):
        return Snapshot(
            queue=await queue_stats.stats(
                connection,
                global_cap=settings.global_cap,
                max_pending=settings.max_pending,
                budget=budget,
            ),
            pool_stats=await stats.read(
                connection,
                domain_map,
                heartbeat_timeout=settings.heartbeat_timeout,
                price_table=prices.load(settings.prices_file),
            ),
            spend=await ledger.totals(connection),
            gradings=await gradings.in_flight(connection),
            signals=await _signals(connection, domain_map),
            pass_times=await _pass_times(connection, domain_map),
        )


async def _signals(
    connection: Connection, domain_map: DomainMap
) -> dict[str, gradings.DomainSignals]:
    """Every domain's, at 0 until a submission of it is graded."""
    found = await gradings.signals_by_domain(connection)
    return {name: found.get(name, NO_SIGNALS) for name in domain_map.domains}


async def _pass_times(
    connection: Connection, domain_map: DomainMap
) -> dict[str, gradings.PassTimes]:
    """Every domain's, empty until a submission of it passes."""
    found = await gradings.pass_times_by_domain(connection)
    return {name: found.get(name, gradings.NO_PASS_TIMES) for name in domain_map.domains}


class Scrape:
    """One scrape's collector: the snapshot's families, then this process's counters."""

    def __init__(self, snapshot: Snapshot, counters: CollectorRegistry) -> None:
        self._snapshot = snapshot
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        snapshot = self._snapshot
        yield from _per_label(GaugeMetricFamily, "lane", snapshot.queue.lanes, LANE_GAUGES)
        yield from _unlabelled(snapshot.queue, QUEUE_GAUGES)
        domains = {each.domain: each for each in snapshot.pool_stats.domains}
        yield from _per_label(GaugeMetricFamily, "domain", domains, DOMAIN_GAUGES)
        yield _disabled_workers(snapshot.pool_stats.domains)
        serves = {each.domain: each.serves for each in snapshot.pool_stats.domains}
        yield from _per_label(CounterMetricFamily, "domain", serves, [SERVES])
        # Every outcome a call can end with, at 0 until one does; a call under way is none.
        by_outcome = snapshot.spend.by_outcome
        ended = {each: by_outcome.get(each, NOTHING_SPENT) for each in get_args(Outcome)}
        yield from _per_label(CounterMetricFamily, "outcome", ended, LEDGER_COUNTERS)
        yield from _unlabelled(by_outcome.get(UNFINISHED, NOTHING_SPENT), [UNFINISHED_CALLS])
        modes: dict[str, Spend] = {
            each: snapshot.spend.by_mode.get(each, NOTHING_SPENT) for each in ledger.MODES
        }
        yield from _per_label(CounterMetricFamily, "mode", modes, MODE_COUNTERS)
        yield from _unlabelled(snapshot.pool_stats, BATCH_GAUGES)
        if snapshot.queue.budget is not None:
            yield from _unlabelled(snapshot.queue.budget, BUDGET_GAUGES)
        yield from _unlabelled(snapshot.gradings, GRADING_GAUGES)
        yield from _per_label(CounterMetricFamily, "domain", snapshot.signals, SIGNAL_COUNTERS)
        yield _histogram(PASS_TIMES, "domain", snapshot.pass_times)
        yield from self._counters.collect()


class Scraping:
    """What this process's scrapes share: the snapshot of the tables, its answer in each format
    (made once, at the snapshot's first scrape in that format, with the counters of the
    moment), and the turns in which scrapes are answered and refused, apart, so that scrapers
    without the token never delay those with it."""

    def __init__(self, snapshots: Snapshots[Snapshot], counters: CollectorRegistry) -> None:
        self.snapshots = snapshots
        self.answer_turns = Pacing(SCRAPE_SPACING_SECONDS)
        self.refusal_turns = Pacing(SCRAPE_SPACING_SECONDS)
        self._counters = counters
        # The latest snapshot's answers so far, by content type.
        self._encoded: Snapshot | None = None
        self._bodies: dict[str, bytes] = {}

    async def answer(self, accept: str) -> tuple[bytes, str]:
        """The latest snapshot and the counters, in the format that `accept` asks for: its
        body and its content type."""
        snapshot = await self.snapshots.latest()
        if snapshot is not self._encoded:
            self._encoded, self._bodies = snapshot, {}
        encode, content_type = choose_encoder(accept)
        if content_type not in self._bodies:
            self._bodies[content_type] = encode(Scrape(snapshot, self._counters))
        return self._bodies[content_type], content_type


def _unlabelled(row: Row, figures: Sequence[Figure[Row]]) -> Iterator[Metric]:
    for figure in figures:
        yield GaugeMetricFamily(
            figure.name, f"{figure.source}: {figure.what}.", value=figure.value(row)
        )


def _disabled_workers(domains: Sequence[stats.DomainPool]) -> Metric:
    """Why a domain waits: the live workers that cannot make it, by the reason each gives (a
    few reasons per domain, such as a missing tool, so the labels stay few)."""
    metric = GaugeMetricFamily(
        "warmpool_pool_domain_disabled_workers",
        f"{DATABASE}: live workers that cannot make the domain's missions, per domain and the "
        "reason they give.",
        labels=["domain", "reason"],
    )
    reasons = Counter(
        (domain.domain, disabled.reason)
        for domain in domains
        for disabled in domain.disabled_reasons
    )
    for (domain, reason), workers in sorted(reasons.items()):
        metric.add_metric([domain, reason], workers)
    return metric


def _per_label(
    family: type[GaugeMetricFamily | CounterMetricFamily],
    label: str,
    rows: Mapping[str, Row],
    figures: Sequence[Figure[Row]],
) -> Iterator[Metric]:
    for figure in figures:
        metric = family(
            figure.name, f"{figure.source}: {figure.what}, per {label}.", labels=[label]
        )
        for key, row in rows.items():
            metric.add_metric([key], figure.value(row))
        yield metric


def _histogram(
    figure: Figure[gradings.PassTimes], label: str, rows: Mapping[str, gradings.PassTimes]
) -> Metric:
    """A histogram per `label`: its cumulative buckets, and the sum that `figure` reads."""
    metric = HistogramMetricFamily(
        figure.name, f"{figure.source}: {figure.what}, per {label}.", labels=[label]
    )
    for key, times in rows.items():
        buckets = [(_bound(bound), count) for bound, count in times.at_most.items()]
        metric.add_metric([key], buckets, figure.value(times))
    return metric


def _bound(le: float) -> str:
    """A bucket's bound as Prometheus writes it: `60.0`, `+Inf`."""
    return "+Inf" if math.isinf(le) else str(le)
