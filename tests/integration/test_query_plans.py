"""The claim and count queries read generation_jobs through the partial indexes on its live
rows only, however much finished history the table holds (migration 0001), and the jobs page
reads a page of index entries per filter (migration 0016); a scrape of /metrics reads neither
every instance nor every ledger row, however many there are; a serve reads the stock through its
partial indexes and primary keys only, and its updates write no index entry (migration 0031).

The plans are the ones Postgres runs: auto_explain logs each executed statement's plan to this
session, nested ones included, so the claim's statement inside its plpgsql function
(migration 0007) is checked as it is, and so is what the budget function inlines into it.
Each plan is checked as a custom plan and as the generic plan that a prepared statement, or a
function's statement, settles on after five runs. Statements that write run in a transaction
that is rolled back, so every test sees the same table.
"""

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

import asyncpg
import msgspec
import pytest

from core import domains
from core.sql import Connection, Queries
from generation.admission import FAIR_SHARE_STEP
from generation.offline import OfflineProvider
from pool import serving
from server.database import create_pool
from server.generation_wiring import spend_budget
from server.metrics import read_snapshot
from server.settings import Settings
from tests.support import postgres
from tests.support.jobs import LIMITS
from tests.support.missions import add_mission
from tests.support.plans import nodes
from tests.support.server import ROOT

queries = Queries("generation")
NOW = datetime(2025, 3, 1, 12, tzinfo=UTC)
FINISHED_JOBS = 40_000
SETTINGS = Settings()
HEARTBEAT_TIMEOUT = timedelta(seconds=SETTINGS.heartbeat_timeout_seconds)
STUCK_AFTER = timedelta(seconds=SETTINGS.stuck_after_seconds)
PENDING_EXPIRY = timedelta(seconds=SETTINGS.pending_expiry_seconds)

PENDING = "generation_jobs_pending"
GENERATING = "generation_jobs_generating"
# The jobs waiting for a batch, whose reservations the budget counts.
WAITING = "generation_jobs_waiting"
ACTIVE_PER_USER = "generation_jobs_active_per_user"
FINISHED = "generation_jobs_finished"
PRIMARY_KEY = "generation_jobs_pkey"

LIVE_INDEXES = {
    PENDING: "(status = 'pending'::text)",
    GENERATING: "(status = 'generating'::text)",
    ACTIVE_PER_USER: (
        "(status = ANY (ARRAY['pending'::text, 'generating'::text, 'awaiting_review'::text]))"
    ),
}

plan_modes = pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])


@pytest.fixture(scope="module")
async def history(postgres_server: str, template: str) -> AsyncIterator[str]:
    """A database whose generation_jobs holds a week of finished jobs and a few live ones."""
    name, url = await postgres.create_database(postgres_server, template)
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(
            """INSERT INTO generation_jobs (lane, user_id, track, domain, status, attempt,
                   worker_id, created_at, fair_time, started_at, heartbeat_at, finished_at,
                   mission_id)
               SELECT lane, CASE WHEN lane = 'interactive' THEN 'user-' || n % 500 END,
                      CASE WHEN lane = 'interactive' THEN 'backend-engineer' END,
                      (ARRAY['python-backend', 'sql-data'])[n % 2 + 1],
                      (ARRAY['completed', 'completed', 'failed', 'cancelled'])[n % 4 + 1], 1,
                      'box:' || n % 40, at, at, at, at + interval '1 minute',
                      at + interval '2 minutes', CASE WHEN n % 4 < 2 THEN n END
               FROM generate_series(1, $2::int) n,
                    LATERAL (SELECT CASE WHEN n % 3 = 0 THEN 'interactive' ELSE 'replenish' END
                                        AS lane,
                                    $1::timestamptz - n * interval '15 seconds' AS at) job""",
            NOW,
            FINISHED_JOBS,
        )
        await connection.execute(
            """INSERT INTO generation_jobs (lane, user_id, track, domain, status, attempt,
                   worker_id, created_at, fair_time, started_at, heartbeat_at, mission_id)
               VALUES
               -- Waiting, one of them for longer than the pending expiry.
               ('interactive', 'user-1', 'backend-engineer', 'python-backend', 'pending', 0,
                NULL, $1::timestamptz - interval '2 hours', $1 - interval '2 hours', NULL, NULL,
                NULL),
               ('interactive', 'user-2', 'backend-engineer', 'python-backend', 'pending', 0,
                NULL, $1 - interval '1 minute', $1 - interval '1 minute', NULL, NULL, NULL),
               ('interactive', 'user-2', 'backend-engineer', 'python-backend', 'pending', 0,
                NULL, $1 - interval '1 minute', $1, NULL, NULL, NULL),
               ('replenish', NULL, NULL, 'python-backend', 'pending', 0,
                NULL, $1 - interval '5 minutes', $1 - interval '5 minutes', NULL, NULL, NULL),
               ('replenish', NULL, NULL, 'sql-data', 'pending', 1,
                NULL, $1 - interval '3 minutes', $1 - interval '3 minutes', NULL, NULL, NULL),
               ('replenish', NULL, NULL, 'sql-data', 'pending', 0,
                NULL, $1 - interval '1 minute', $1 - interval '1 minute', NULL, NULL, NULL),
               -- In flight: healthy, silent past the heartbeat timeout, and stuck.
               ('interactive', 'user-3', 'backend-engineer', 'python-backend', 'generating', 1,
                'box:7', $1 - interval '2 minutes', $1 - interval '2 minutes',
                $1 - interval '1 minute', $1 - interval '5 seconds', NULL),
               ('replenish', NULL, NULL, 'python-backend', 'generating', 1,
                'box:7', $1 - interval '3 minutes', $1 - interval '3 minutes',
                $1 - interval '2 minutes', $1 - interval '10 seconds', NULL),
               ('replenish', NULL, NULL, 'sql-data', 'generating', 2,
                'box:9', $1 - interval '9 minutes', $1 - interval '9 minutes',
                $1 - interval '8 minutes', $1 - interval '7 minutes', NULL),
               ('replenish', NULL, NULL, 'sql-data', 'generating', 1,
                'box:7', $1 - interval '1 hour', $1 - interval '1 hour',
                $1 - interval '50 minutes', $1 - interval '5 seconds', NULL),
               -- Waiting on a review.
               ('interactive', 'user-4', 'backend-engineer', 'python-backend', 'awaiting_review',
                1, 'box:7', $1 - interval '30 minutes', $1 - interval '30 minutes',
                $1 - interval '29 minutes', $1 - interval '25 minutes', 900001),
               ('interactive', 'user-5', 'backend-engineer', 'sql-data', 'awaiting_review',
                1, 'box:9', $1 - interval '20 minutes', $1 - interval '20 minutes',
                $1 - interval '19 minutes', $1 - interval '15 minutes', 900002)""",
            NOW,
        )
        await connection.execute("ANALYZE generation_jobs")
    finally:
        await connection.close()
    yield url
    await postgres.drop_database(postgres_server, name)


Run = Callable[[asyncpg.Connection], Awaitable[Any]]


async def executed_plans(
    url: str,
    plan_mode: str,
    run: Run,
    *,
    tables: tuple[str, ...] = ("generation_jobs",),
    # The transaction's, when `run` opens one of its own (asyncpg nests only the same level).
    isolation: Literal["repeatable_read"] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """What `run` returns, and the plan of every statement it executed that reads one of
    `tables`, as auto_explain logged them; its writes are rolled back."""
    logged: list[asyncpg.PostgresLogMessage] = []
    connection = await asyncpg.connect(url)
    try:
        connection.add_log_listener(lambda _connection, message: logged.append(message))
        await connection.execute("LOAD 'auto_explain'")
        await connection.execute(
            f"""SET plan_cache_mode = {plan_mode};
                SET auto_explain.log_min_duration = 0;
                SET auto_explain.log_nested_statements = on;
                SET auto_explain.log_format = json;
                SET client_min_messages = log"""
        )
        transaction = connection.transaction(isolation=isolation)
        await transaction.start()
        try:
            result = await run(connection)
        finally:
            await transaction.rollback()
    finally:
        await connection.close()
    plans = []
    for message in logged:
        if message.message.startswith("duration:") and "\n" in message.message:
            plan = json.loads(message.message.split("\n", 1)[1])
            if any(node.get("Relation Name") in tables for node in nodes(plan["Plan"])):
                plans.append(plan)
    assert plans, f"auto_explain logged no plan that reads {' or '.join(tables)}: {logged}"
    return result, plans


def reads_of_jobs(plan: dict[str, Any], table: str = "generation_jobs") -> set[str]:
    """How a plan reads generation_jobs (or `table`): the index of each scan, or the scan's node
    type ("Seq Scan", ...) when it goes through none."""
    reads = set()
    for node in nodes(plan):
        if node.get("Relation Name") != table or node["Node Type"] == "ModifyTable":
            continue
        if "Index Name" in node:
            reads.add(node["Index Name"])
        elif node["Node Type"] == "Bitmap Heap Scan":
            reads |= {child["Index Name"] for child in nodes(node) if "Index Name" in child}
        else:
            reads.add(node["Node Type"])
    return reads


def part(plan: dict[str, Any], name: str) -> dict[str, Any]:
    """The subtree that computes one materialized CTE ("CTE depth") or sub-plan."""
    found = [node for node in nodes(plan) if node.get("Subplan Name") == name]
    assert len(found) == 1, f"no single {name!r} in the plan:\n{json.dumps(plan, indent=1)}"
    return found[0]


def check(
    plans: list[dict[str, Any]], *, only: set[str], parts: dict[str, set[str]] | None = None
) -> None:
    """Every statement reads generation_jobs through the indexes in `only`, and each named
    part of a statement through exactly its own."""
    reads = set().union(*(reads_of_jobs(plan["Plan"]) for plan in plans))
    shown = "\n".join(json.dumps(plan, indent=1) for plan in plans)
    assert reads, shown
    assert reads <= only, f"generation_jobs read through {reads - only}:\n{shown}"
    for name, indexes in (parts or {}).items():
        found = [
            reads_of_jobs(part(plan["Plan"], name))
            for plan in plans
            if any(node.get("Subplan Name") == name for node in nodes(plan["Plan"]))
        ]
        assert found == [indexes], f"{name} reads generation_jobs through {found}:\n{shown}"


# The claim as the previous release's workers call it during a rolling deploy: every domain.
CLAIM_OF_EVERY_DOMAIN = """SELECT * FROM generation_claim_within_cap(
    $1::int, $2::int, $3::int, $4::text, $5::timestamptz, $6::numeric, $7::numeric, $8::numeric
)"""


@plan_modes
@pytest.mark.parametrize(
    ("statement", "of_domains", "claims"),
    [
        pytest.param(
            queries["job_claim_within_cap"],
            [None],
            [("interactive", "python-backend")] * 3,
            id="every-domain",
        ),
        # Only the pending sql-data jobs, all on the replenish lane, under its share of the cap.
        pytest.param(
            queries["job_claim_within_cap"],
            [["sql-data", "javascript-frontend"]],
            [("replenish", "sql-data")] * 2,
            id="some-domains",
        ),
        pytest.param(
            CLAIM_OF_EVERY_DOMAIN, [], [("interactive", "python-backend")] * 3, id="eight-arguments"
        ),
    ],
)
async def test_the_claim_counts_in_flight_and_picks_candidates_from_the_live_rows(
    history: str,
    plan_mode: str,
    statement: str,
    of_domains: list[list[str] | None],
    claims: list[tuple[str, str]],
) -> None:
    claimed, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetch(
            statement,
            3,
            10,
            5,
            "box:11",
            NOW,
            # With a budget, so the claim also sums the reservations of the jobs in flight.
            Decimal(100),
            Decimal(1),
            Decimal(10),
            *of_domains,
        ),
    )

    assert [(row["lane"], row["domain"]) for row in claimed] == claims
    check(
        plans,
        # The claimed rows are updated by id: through the primary key, or through the pending
        # index when the planner finds it as cheap.
        only={GENERATING, WAITING, PENDING, PRIMARY_KEY},
        parts={
            # The in-flight count and the budget's outstanding reservations (of the jobs
            # generating, and of those waiting for a batch).
            "CTE room": {GENERATING, WAITING},
            "CTE interactive": {PENDING},
            "CTE replenish": {PENDING},
        },
    )


@plan_modes
async def test_the_enqueue_reads_the_depth_from_its_shards_and_the_users_jobs_from_live_rows(
    history: str, plan_mode: str
) -> None:
    row, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetchrow(
            queries["job_insert_within_limits"],
            "interactive",
            "user-2",
            "backend-engineer",
            "python-backend",
            LIMITS.user_cap,
            LIMITS.max_pending,
            FAIR_SHARE_STEP,
            NOW,
            LIMITS.replenish_max_pending,
            None,
            None,
            None,
            None,
        ),
    )

    assert (row["active_jobs"], row["pending"]) == (2, 6)
    assert row["job_id"] is not None
    # The depth reads no job at all, however deep the queue.
    check(
        plans,
        only={PENDING, ACTIVE_PER_USER},
        parts={"CTE depth": set(), "CTE active": {ACTIVE_PER_USER}},
    )


@plan_modes
async def test_the_sweeper_finds_stale_and_stuck_generations_among_the_live_rows(
    history: str, plan_mode: str
) -> None:
    swept, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetch(
            queries["jobs_fail_if_stale"], HEARTBEAT_TIMEOUT, STUCK_AFTER, NOW
        ),
    )

    assert sorted(row["worker_id"] for row in swept) == ["box:7", "box:9"]
    # The rows the selection found are then updated by id.
    check(plans, only={GENERATING, PRIMARY_KEY}, parts={})
    assert GENERATING in set().union(*(reads_of_jobs(plan["Plan"]) for plan in plans))


@plan_modes
async def test_the_sweeper_expires_pending_jobs_from_the_live_rows(
    history: str, plan_mode: str
) -> None:
    expired, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetch(
            queries["jobs_fail_if_pending_expired"], PENDING_EXPIRY, NOW
        ),
    )

    assert len(expired) == 1
    check(plans, only={PENDING})


@plan_modes
async def test_the_queue_stats_count_from_the_live_rows(history: str, plan_mode: str) -> None:
    lanes, plans = await executed_plans(
        history, plan_mode, lambda connection: connection.fetch(queries["queue_stats"], NOW)
    )

    assert [(row["lane"], row["pending"], row["generating"]) for row in lanes] == [
        ("interactive", 3, 1),
        ("replenish", 3, 3),
    ]
    check(plans, only={PENDING, GENERATING})


@plan_modes
async def test_a_starting_worker_finds_its_dead_processes_jobs_among_the_live_rows(
    history: str, plan_mode: str
) -> None:
    async def reconcile(connection: asyncpg.Connection) -> list[asyncpg.Record]:
        workers = await connection.fetch(queries["worker_ids_generating"])
        assert sorted(row["worker_id"] for row in workers) == ["box:7", "box:9"]
        return await connection.fetch(
            queries["jobs_fail_if_owned_by_dead_process"], ["box:9"], HEARTBEAT_TIMEOUT, NOW
        )

    failed, plans = await executed_plans(history, plan_mode, reconcile)

    assert len(failed) == 1
    check(plans, only={GENERATING})


@plan_modes
async def test_a_worker_finds_the_jobs_of_a_lost_claim_answer_among_the_live_rows(
    history: str, plan_mode: str
) -> None:
    released, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetch(queries["jobs_release_if_not_held"], "box:7", []),
    )

    assert len(released) == 3
    check(plans, only={GENERATING})


@plan_modes
async def test_retention_deletes_a_batch_by_primary_key_whatever_the_tables_size(
    history: str, plan_mode: str
) -> None:
    deleted, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.execute(
            queries["jobs_delete_finished_before"], NOW - timedelta(days=3), 500
        ),
    )

    assert deleted == "DELETE 500"
    # Not once per batch through the whole table: the oldest by their finish, then by id.
    check(plans, only={FINISHED, PRIMARY_KEY})
    assert {FINISHED, PRIMARY_KEY} <= set().union(*(reads_of_jobs(p["Plan"]) for p in plans))


LISTED = "generation_jobs_listed"
OF_USER = "generation_jobs_of_user"
EVERY_LANE = ["interactive", "replenish"]
FIRST_SHOWN = ["pending", "generating", "failed"]


def read_by_id_only(plans: list[dict[str, Any]]) -> None:
    """The primary key finds the rows that another index named, one id each: it is never read
    in order and filtered."""
    for plan in plans:
        for node in nodes(plan["Plan"]):
            if node.get("Index Name") == PRIMARY_KEY:
                assert re.fullmatch(r"\(id = [^()]+\)", node["Index Cond"]), json.dumps(node)
                assert "Filter" not in node, json.dumps(node)


@plan_modes
@pytest.mark.parametrize(
    ("statuses", "lanes", "domain", "user_id", "before"),
    [
        pytest.param(FIRST_SHOWN, EVERY_LANE, None, None, None, id="first-shown"),
        pytest.param(["failed"], ["interactive"], "python-backend", None, 30_000, id="older-page"),
        # No job at all: the probes find none, where a scan by id would read every row.
        pytest.param(FIRST_SHOWN, EVERY_LANE, "javascript-frontend", None, None, id="no-job"),
        pytest.param(["completed", "failed"], EVERY_LANE, None, "user-6", None, id="one-user"),
    ],
)
async def test_the_jobs_page_reads_a_page_of_entries_per_status_lane_and_domain(
    history: str,
    plan_mode: str,
    statuses: list[str],
    lanes: list[str],
    domain: str | None,
    user_id: str | None,
    before: int | None,
) -> None:
    size = 50
    domains = [domain] if domain else sorted(DOMAIN_MAP.domains)
    rows, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetch(
            queries["jobs_listed"], statuses, lanes, domains, before, size, user_id
        ),
    )

    connection = await asyncpg.connect(history)
    try:
        expected = await connection.fetch(
            """SELECT id FROM generation_jobs
               WHERE status = ANY($1) AND lane = ANY($2) AND domain = ANY($3)
                 AND ($4::text IS NULL OR user_id = $4)
                 AND ($5::bigint IS NULL OR (created_at, id) < (
                     SELECT created_at, id FROM generation_jobs WHERE id = $5))
               ORDER BY created_at DESC, id DESC LIMIT $6""",
            statuses,
            lanes,
            domains,
            user_id,
            before,
            size,
        )
    finally:
        await connection.close()
    assert [row["id"] for row in rows] == [row["id"] for row in expected]
    assert rows or domain == "javascript-frontend"
    # The queue's live rows through any of its partial indexes: a few hundred rows at most.
    check(plans, only={LISTED, OF_USER, PENDING, GENERATING, ACTIVE_PER_USER, PRIMARY_KEY})
    read_by_id_only(plans)
    if plan_mode == "force_custom_plan":
        # Costed as what it reads: compiling it would take a hundred times longer than that.
        assert not [plan["JIT"] for plan in plans if "JIT" in plan]
    if user_id:
        assert OF_USER in set().union(*(reads_of_jobs(plan["Plan"]) for plan in plans))
    ledger = {node.get("Index Name") for plan in plans for node in reads(plan, "llm_calls")}
    assert ledger <= {LEDGER_BY_JOB}, "each job's spend by its own ledger rows"


@plan_modes
async def test_the_jobs_page_counts_each_domains_queue_from_the_live_rows(
    history: str, plan_mode: str
) -> None:
    lanes, plans = await executed_plans(
        history,
        plan_mode,
        lambda connection: connection.fetch(
            queries["jobs_at_a_glance_by_domain"], sorted(DOMAIN_MAP.domains)
        ),
    )

    counted = {(row["domain"], row["lane"]): (row["pending"], row["generating"]) for row in lanes}
    assert counted[("python-backend", "interactive")] == (3, 1)
    assert counted[("sql-data", "replenish")] == (2, 2)
    connection = await asyncpg.connect(history)
    try:
        last_failures = await connection.fetch(
            """SELECT DISTINCT ON (domain, lane) id FROM generation_jobs
               WHERE status = 'failed' ORDER BY domain, lane, created_at DESC, id DESC"""
        )
    finally:
        await connection.close()
    failures = [row["failed_job_id"] for row in lanes if row["failed_job_id"] is not None]
    assert failures == [row["id"] for row in last_failures]
    check(plans, only={LISTED, PENDING, GENERATING, PRIMARY_KEY})
    read_by_id_only(plans)


async def test_the_indexes_these_plans_go_through_hold_the_live_rows_only(history: str) -> None:
    connection = await asyncpg.connect(history)
    try:
        predicates = await connection.fetch(
            """SELECT indexrelid::regclass::text AS name, pg_get_expr(indpred, indrelid) AS rows
               FROM pg_index WHERE indexrelid::regclass::text = ANY($1::text[])""",
            list(LIVE_INDEXES),
        )
    finally:
        await connection.close()
    assert {row["name"]: row["rows"] for row in predicates} == LIVE_INDEXES


# Instances and ledger rows of 40 days, a few each hour of the last day.
SERVED_HISTORY = 40_000
DOMAIN_MAP = domains.load(ROOT / "domain_map.yaml")


@pytest.fixture(scope="module")
async def served_history(postgres_server: str, template: str) -> AsyncIterator[str]:
    """A database with a long history of serves (retired missions and their instances) and of
    model calls, a live stock, and generations in flight."""
    name, url = await postgres.create_database(postgres_server, template)
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(
            """INSERT INTO missions (domain, kind, language, title, brief, gold_files,
                   test_files, sabotaged_files, bug_summary, proof, provider, qa_status,
                   serve_count, max_serves, retired_at, retire_reason, reviewed_at,
                   content_hash)
               SELECT domain, 'technical', 'python', 'mission ' || n, 'b', '{}', '{}', '{}', 's',
                      '{}', 'test', 'approved', 10, CASE WHEN live THEN 20 ELSE 10 END,
                      CASE WHEN NOT live THEN $1::timestamptz - n * interval '10 minutes' END,
                      CASE WHEN NOT live THEN 'served 10 times' END,
                      $1::timestamptz - n * interval '10 minutes' - interval '1 day',
                      sha256(('mission-' || n)::bytea)
               FROM generate_series(1, $2::int / 10) n,
                    LATERAL (SELECT (ARRAY['python-backend', 'sql-data'])[n % 2 + 1] AS domain,
                                    n <= 20 AS live) mission""",
            NOW,
            SERVED_HISTORY,
        )
        await connection.execute(
            """INSERT INTO mission_instances (mission_id, user_id, track, domain, language,
                   title, brief, files, serve_number, created_at)
               SELECT m.id, 'user-' || n, 'backend-engineer', m.domain, 'python', 't', 'b', '{}',
                      1, $1::timestamptz - n * interval '90 seconds'
               FROM generate_series(1, $2::int) n
               JOIN missions m ON m.title = 'mission ' || (1 + n % ($2::int / 10))""",
            NOW,
            SERVED_HISTORY,
        )
        await connection.execute(
            """INSERT INTO generation_jobs (lane, domain, status, attempt, worker_id, created_at,
                   fair_time, started_at, heartbeat_at, reserved_usd)
               SELECT 'replenish', 'python-backend', 'generating', 1, 'box:1', $1, $1, $1, $1, 1
               FROM generate_series(1, 3)""",
            NOW - timedelta(minutes=1),
        )
        await connection.execute(
            """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model,
                   started_at, finished_at, input_tokens, output_tokens, cost_usd, outcome)
               SELECT n, 1, 1, 'generate', 'test', 'm', at, at + interval '30 seconds', 100, 50,
                      0.001, (ARRAY['ok', 'ok', 'failed', 'refused'])[n % 4 + 1]
               FROM generate_series(1, $2::int) n,
                    LATERAL (SELECT $1::timestamptz - n * interval '90 seconds' AS at) call""",
            NOW,
            SERVED_HISTORY,
        )
        await connection.execute("VACUUM ANALYZE")
    finally:
        await connection.close()
    yield url
    await postgres.drop_database(postgres_server, name)


INSTANCES_BY_DOMAIN_AND_TIME = "mission_instances_domain_created"
LEDGER_BY_START = "llm_calls_started"
LEDGER_BY_JOB = "llm_calls_job_call"
MISSIONS_INDEXES = {
    "missions_servable",
    "missions_awaiting_review",
    "missions_out_of_stock",
    "missions_out_of_stock_serves",
}


@plan_modes
async def test_a_scrape_reads_neither_every_instance_nor_every_ledger_row(
    served_history: str, plan_mode: str
) -> None:
    # With a budget, so that a scrape also reads today's spend and the reservations.
    settings = msgspec.structs.replace(SETTINGS, daily_budget_usd=10.0)
    snapshot, plans = await executed_plans(
        served_history,
        plan_mode,
        lambda connection: read_snapshot(
            connection,
            settings,
            DOMAIN_MAP,
            spend_budget(settings, OfflineProvider(delay_seconds=0)),
        ),
        tables=("mission_instances", "llm_calls", "missions"),
        isolation="repeatable_read",
    )

    half = SERVED_HISTORY // 2
    serves = {domain.domain: domain.serves for domain in snapshot.pool_stats.domains}
    assert serves == {"python-backend": half, "sql-data": half} | {
        name: 0 for name in DOMAIN_MAP.domains if name not in ("python-backend", "sql-data")
    }
    assert snapshot.spend.by_outcome["ok"].llm_calls == half
    assert snapshot.queue.budget is not None
    shown = "\n".join(json.dumps(plan, indent=1) for plan in plans)
    instances = [node for plan in plans for node in reads(plan, "mission_instances")]
    # Only the replenishment forecast's window: the last day's serves of each domain.
    assert instances, shown
    for node in instances:
        assert node.get("Index Name") == INSTANCES_BY_DOMAIN_AND_TIME, shown
        assert "created_at" in node["Index Cond"], shown
    # The serves ever made are summed from the missions' counts, through the indexes that
    # hold each mission once; the reviews of the forecast's window are read by review time.
    missions = {
        node.get("Index Name", node["Node Type"])
        for plan in plans
        for node in reads(plan, "missions")
    }
    assert missions <= MISSIONS_INDEXES, shown
    ledger = [node for plan in plans for node in reads(plan, "llm_calls")]
    # Only today's spend, and the spend of the generations in flight.
    assert {node.get("Index Name") for node in ledger} == {LEDGER_BY_START, LEDGER_BY_JOB}, shown
    for node in ledger:
        bound = "started_at" if node["Index Name"] == LEDGER_BY_START else "job_id"
        assert bound in node["Index Cond"], shown


@plan_modes
async def test_the_abandoned_calls_pass_reads_only_the_open_calls(
    served_history: str, plan_mode: str
) -> None:
    async def one_pass(connection: Connection) -> list[int]:
        cut_off: int = await connection.fetchval(
            """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model,
                   mode, started_at)
               VALUES (0, 1, 1, 'generate', 'openai', 'm', 'background', $1) RETURNING id""",
            NOW - timedelta(hours=1),
        )
        assert await connection.fetch(queries["llm_calls_open_of_abandoned_jobs"], True, 50) == []
        booked = await connection.fetch(queries["llm_calls_book_cut_off"], 50, NOW, Decimal(1), 60)
        assert [row["id"] for row in booked] == [cut_off]
        return [row["id"] for row in booked]

    _, plans = await executed_plans(served_history, plan_mode, one_pass, tables=("llm_calls",))

    ledger = set().union(*(reads_of_jobs(plan["Plan"], "llm_calls") for plan in plans))
    assert ledger == {"llm_calls_open_at_provider", "llm_calls_open_unnamed"}, ledger


def reads(plan: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The scans of `table` in a plan (for a bitmap, the index scans under its heap scan)."""
    found = []
    for node in nodes(plan["Plan"]):
        if node.get("Relation Name") != table or node["Node Type"] == "ModifyTable":
            continue
        if node["Node Type"] == "Bitmap Heap Scan":
            found += [child for child in nodes(node) if "Index Name" in child]
        else:
            found.append(node)
    return found


@plan_modes
async def test_the_spend_page_reads_the_kept_daily_totals_never_the_ledger(
    served_history: str, plan_mode: str
) -> None:
    today = NOW.date()
    days, plans = await executed_plans(
        served_history,
        plan_mode,
        lambda connection: connection.fetch(
            queries["llm_spend_by_day"], today - timedelta(days=13), today
        ),
        tables=("llm_spend_daily", "llm_calls"),
    )

    # A call every 90 seconds: 960 a day, and the first day's are those before NOW.
    assert sum(row["llm_calls"] for row in days) == 13 * 960 + 480
    assert {row["outcome"] for row in days} == {"ok", "failed", "refused"}
    assert not [node for plan in plans for node in reads(plan, "llm_calls")]


@pytest.fixture(scope="module")
async def serving_history(postgres_server: str, template: str) -> AsyncIterator[str]:
    """A stock of 10 missions of 5 bugs each beside a long history: 2,000 retired missions, each
    with its retired bug and rendering, and their 20,000 instances."""
    name, url = await postgres.create_database(postgres_server, template)
    db = await create_pool(url, max_size=1)
    try:
        for _ in range(10):
            await add_mission(db, variants=5, bug_share=20)
        await db.execute(
            """INSERT INTO missions (domain, kind, language, title, brief, gold_files,
                   test_files, sabotaged_files, bug_summary, proof, provider, qa_status,
                   serve_count, max_serves, retired_at, retire_reason, content_hash)
               SELECT 'python-backend', 'technical', 'python', 'past ' || n, 'b', '{}', '{}',
                      '{}', 's', '{}', 'test', 'approved', 10, 10, now(), 'served 10 times',
                      sha256(('past-' || n)::bytea)
               FROM generate_series(1, 2000) n"""
        )
        await db.execute(
            """WITH variant AS (
                   INSERT INTO mission_variants (mission_id, sabotaged_files, bug_summary, proof,
                          provider, serve_count, max_serves, rendered_serves, retired_at,
                          retire_reason, content_hash)
                   SELECT m.id, '{}', 's', '{}', 'test', 10, 10, 10, now(), 'served 10 times',
                          m.content_hash
                   FROM missions m WHERE m.retired_at IS NOT NULL
                   RETURNING id, mission_id
               )
               INSERT INTO mission_renderings (variant_id, mission_id, files, gold_files,
                      test_files, hidden_test_files, renderer, proof, status, serve_count,
                      max_serves)
               SELECT id, mission_id, '{}', '{}', '{}', '{}', 'identity', '{}', 'ready', 10, 10
               FROM variant"""
        )
        await db.execute(
            """INSERT INTO mission_instances (mission_id, user_id, track, domain, language,
                   title, brief, files, serve_number, created_at)
               SELECT m.id, 'past-user-' || n, 'backend-engineer', 'python-backend', 'python',
                      't', 'b', '{}', 1, now()
               FROM generate_series(1, 20000) n
               JOIN missions m ON m.title = 'past ' || (1 + n % 2000)"""
        )
        await db.execute("VACUUM ANALYZE")
    finally:
        await db.close()
    yield url
    await postgres.drop_database(postgres_server, name)


SERVING_READS = {
    "missions": {"missions_servable", "missions_pkey"},
    "mission_variants": {"mission_variants_servable", "mission_variants_pkey"},
    "mission_renderings": {"mission_renderings_servable", "mission_renderings_pkey"},
    # The user's instances (does the user have it?) and the cohort's, never all of them.
    "mission_instances": {
        "mission_instances_mission_id_user_id_key",
        "mission_instances_user",
        "mission_instances_cohort",
    },
}


def serve_once(connection: Connection) -> Awaitable[serving.Instance | None]:
    return serving.serve(
        connection,
        user_id="a-new-user",
        track="backend-engineer",
        domains=DOMAIN_MAP.domains_for("backend-engineer"),
    )


@plan_modes
async def test_a_serve_reads_the_stock_through_its_partial_indexes_and_primary_keys(
    serving_history: str, plan_mode: str
) -> None:
    instance, plans = await executed_plans(
        serving_history, plan_mode, serve_once, tables=tuple(SERVING_READS)
    )
    assert instance is not None
    shown = "\n".join(json.dumps(plan, indent=1) for plan in plans)
    for table, indexes in SERVING_READS.items():
        read = {
            node.get("Index Name", node["Node Type"])
            for plan in plans
            for node in reads(plan, table)
        }
        assert read <= indexes, f"{table} read through {read - indexes}:\n{shown}"


async def test_a_serve_writes_no_index_entry_for_its_counts(serving_history: str) -> None:
    """The serve's three updates (mission, variant, rendering) are HOT updates: the counts
    they raise are in no index, so a serve costs no more index writes than its instance's."""
    db = await create_pool(serving_history, max_size=1)
    try:
        async with db.acquire() as connection:
            transaction = connection.transaction()
            await transaction.start()
            assert await serve_once(connection) is not None
            updates = await connection.fetch(
                """SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
                   WHERE relname IN ('missions', 'mission_variants', 'mission_renderings')"""
            )
            await transaction.rollback()
    finally:
        await db.close()
    assert {row["relname"]: (row["n_tup_upd"], row["n_tup_hot_upd"]) for row in updates} == {
        "missions": (1, 1),
        "mission_variants": (1, 1),
        "mission_renderings": (1, 1),
    }
