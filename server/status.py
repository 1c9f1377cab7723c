"""`warmpool status`: the queue and the pool per domain at a glance in a terminal."""

from __future__ import annotations

from core import domains
from core.sql import Connection
from generation import queue_stats
from generation.openai import prices
from generation.registry import explained
from pool import stats
from server.settings import Settings

POOL_COLUMNS = (
    ("domain", "<20"),
    ("approved", ">8"),
    ("review", ">6"),
    ("serves left", ">11"),
    ("target", ">6"),
    ("in flight", ">9"),
    ("pending", ">7"),
    ("supply", ">6"),
    ("serves/h", ">8"),
    ("lead p90", ">8"),
    ("empty in", ">8"),
    ("deficit", ">7"),
    ("enabled", ">7"),
)

BATCH_COLUMNS = ("batch", "provider id", "status", "lines", "done", "failed")
BATCH_ALIGN = (">6", "<34", "<12", ">5", ">5", ">6")


async def print_status(connection: Connection, settings: Settings) -> None:
    await _print_queue(connection, settings)
    print()
    pool_stats = await stats.read(
        connection,
        domains.load(settings.domain_map),
        heartbeat_timeout=settings.heartbeat_timeout,
        price_table=prices.load(settings.prices_file),
    )
    _print_pool(pool_stats)
    print()
    _print_batches(pool_stats)


async def _print_queue(connection: Connection, settings: Settings) -> None:
    queued = await queue_stats.stats(
        connection, global_cap=settings.global_cap, max_pending=settings.max_pending
    )
    print(
        f"queue: {queued.pending} pending (limit {queued.max_pending}), "
        f"{queued.generating} generating (cap {queued.global_cap})"
    )
    print(f"{'lane':<12} {'pending':>8} {'generating':>11} {'oldest pending':>15}")
    for name, lane in queued.lanes.items():
        age = "-" if lane.oldest_pending_age_s is None else f"{lane.oldest_pending_age_s:.0f}s"
        print(f"{name:<12} {lane.pending:>8} {lane.generating:>11} {age:>15}")


def _print_pool(pool_stats: stats.PoolView) -> None:
    print("pool (supply: approved missions expected once review and generations are done)")
    print(" ".join(f"{title:{align}}" for title, align in POOL_COLUMNS))
    for each in pool_stats.domains:
        outlook = each.forecast
        cells = (
            each.domain if each.reachable else f"{each.domain} (no track)",
            each.approved,
            each.awaiting_review,
            each.remaining_serves,
            each.target,
            each.in_flight,
            each.pending,
            f"{outlook.supply_missions:.1f}",
            f"{outlook.serve_rate_per_hour:.1f}",
            duration(outlook.lead_time_p90_s),
            duration(outlook.time_to_empty_s),
            outlook.deficit,
            "yes" if each.enabled else "no",
        )
        aligned = zip(cells, (align for _, align in POOL_COLUMNS), strict=True)
        print(" ".join(f"{cell:{align}}" for cell, align in aligned))
    _print_disabled(pool_stats)


def _print_batches(pool_stats: stats.PoolView) -> None:
    """The batches under way, and what batching and taking calls over saved."""
    lane, spend = pool_stats.batches, pool_stats.spend
    print(
        f"batches: {len(lane.batches)} open, {lane.queued_lines} line(s) waiting to go out, "
        f"{lane.waiting_jobs} job(s) waiting for a line; saved ${spend.saved_by_batch_usd:.2f} "
        f"by batching and ${spend.saved_by_resumed_usd:.2f} by {spend.resumed_calls} call(s) "
        "taken over"
    )
    rows = [
        (
            each.id,
            each.provider_batch_id or "-",
            each.status,
            each.lines,
            each.completed_lines,
            each.failed_lines,
        )
        for each in lane.batches
    ]
    for cells in [BATCH_COLUMNS, *rows] if rows else []:
        print(" ".join(f"{cell:{align}}" for cell, align in zip(cells, BATCH_ALIGN, strict=True)))


def _print_disabled(pool_stats: stats.PoolStats) -> None:
    """Why the live workers cannot make a domain, for every domain that some cannot make."""
    lines = [
        f"  {each.domain}: {explained(each.disabled_reasons)}"
        for each in pool_stats.domains
        if each.disabled_reasons or not each.enabled
    ]
    if lines:
        print()
        print("workers that cannot make a domain (enabled: no, when none can)")
        print("\n".join(lines))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, whole_seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{whole_seconds:02d}s" if minutes else f"{whole_seconds}s"
