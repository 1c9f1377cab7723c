"""Serve benchmark: POST /v1/serve over HTTP beside the route's serve called straight through
asyncpg (the ceiling) and beside the serve as it was before variants, on empty history and on a
million historical instances; and its p99 at half the peak rate beside that of a bare INSERT
and COMMIT at the same rate on the same Postgres (the floor the commit's flush sets).

    python bench/serve.py [--seconds 10] [--clients 32] [--database-url postgresql://...]

For each table state it prints: serves per second and p50/p99 latency over HTTP at
`--clients` concurrent clients (wrk, from Debian's `wrk` package, on keep-alive connections to
one `warmpool serve --no-worker` process: a load generator that costs the 2 cores little),
the same for the route's serve called as its handler calls it, with as many connections,
their ratio, the serve of before variants (one mission, its count, the instance, in a
transaction as then) through asyncpg the same way (the three in `--turns` turns, each figure its
median turn's), and p50/p99 over HTTP at half the measured peak rate (each connection pausing
at random between its requests), with a one-row INSERT and its COMMIT through asyncpg at that
same rate. Then it loads 1,000,000 historical instances and 100,000 retired missions and
measures again. Every serving phase has stock of its own, enough for `--stock-rate` serves a
second: technical missions of 100 serves, their 20 bugs each served to 5 candidates
(bug_share), each serve from a rendering of its own, served once; a reviewer approves 40
missions at a time as the serves use them up (40 to 80 missions approved at once), so that a
serve chooses among as many missions as a pool holds. A phase whose stock ran out stops the
benchmark. Goals: HTTP at least half the ceiling; the ceiling at least 90 % of the serve
before variants; p99 at half the peak rate under 25 ms or within 2x the floor's; within 20 %
of the empty-table figures at a million rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import itertools
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from functools import partial

import asyncpg

from bench.http_load import Figures, figures, wrk
from bench.scratch import connected, database_parser, fresh_database
from core.domains import load
from core.sql import Connection
from generation.offline import catalog
from pool import requests, serving
from server import migrate
from server.auth import create_key
from server.database import create_pool
from server.services import queue_limits
from server.settings import Settings
from tests.support.server import running_server
from tests.support.serving import asked

TRACK = "backend-engineer"
HISTORY_INSTANCES = 1_000_000
HISTORY_RETIRED = 100_000
BUG_SHARE = 5  # the shipped domains': candidates per planted bug
MISSION_SERVES = 100  # a technical mission's serves
LIVE_MISSIONS = 40  # approved at a time, of the stock a phase needs
# LIVE_MISSIONS more, once the approved missions have fewer serves left than a tenth of theirs:
# serving the least served first, missions approved together retire together, so the next
# are approved well before, not when the last of them retires.
APPROVE = """
UPDATE missions SET qa_status = 'approved', reviewed_at = now()
WHERE id = ANY (ARRAY(
    SELECT id FROM missions WHERE qa_status = 'awaiting_review' AND retired_at IS NULL
    ORDER BY id LIMIT $1
))
AND (SELECT coalesce(sum(max_serves - serve_count), 0) FROM missions
     WHERE qa_status = 'approved' AND retired_at IS NULL) < $1 * $2 / 10
"""
_users = itertools.count()
CATALOG = [mission for mission in catalog.load() if mission.language == "python"]
# The serve before variants (pool/queries.sql and pool/serving.py before 379b1c7), on today's
# schema: the least-served mission the user does not have, its count, and the instance from its
# files, returned whole and made into the Instance the route answers with, as then (variant 0,
# no cohort: those came with variants); when every such mission is locked, one of the least
# served is waited for.
PRE_VARIANT_SERVE = """
WITH eligible AS (
    SELECT m.id, m.serve_count FROM missions m
    WHERE m.domain = ANY($1::text[])
      AND m.qa_status = 'approved' AND m.retired_at IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = $2::text
      )
),
chosen AS (
    SELECT m.id FROM missions m
    WHERE m.id = ANY (ARRAY(
              SELECT id FROM eligible
              WHERE serve_count = (SELECT min(serve_count) FROM eligible)
          ))
      AND m.serve_count = (SELECT min(serve_count) FROM eligible)
      AND ($4::bigint IS NULL OR m.id = $4::bigint)
    ORDER BY m.id
    LIMIT 1
    FOR UPDATE OF m SKIP LOCKED
),
served AS (
    UPDATE missions m
    SET serve_count = m.serve_count + 1,
        retired_at = CASE WHEN m.serve_count + 1 >= m.max_serves THEN now() END,
        retire_reason = CASE WHEN m.serve_count + 1 >= m.max_serves
                             THEN 'served ' || m.max_serves || ' times' END
    FROM chosen
    WHERE m.id = chosen.id AND m.qa_status = 'approved' AND m.retired_at IS NULL
    RETURNING m.id, m.domain, m.language, m.title, m.brief, m.sabotaged_files, m.test_files,
              m.serve_count
)
INSERT INTO mission_instances
    (mission_id, user_id, track, domain, language, title, brief, files, serve_number, created_at)
SELECT id, $2::text, $3::text, domain, language, title, brief, sabotaged_files || test_files,
       serve_count, now()
FROM served
RETURNING id, mission_id, user_id, track, domain, language, title, brief, files, serve_number,
          created_at, 0 AS variant_id, NULL::text AS cohort
"""
PRE_VARIANT_LEAST_SERVED_ID = """
SELECT m.id FROM missions m
WHERE m.domain = ANY($1::text[]) AND m.qa_status = 'approved' AND m.retired_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM mission_instances i WHERE i.mission_id = m.id AND i.user_id = $2::text
  )
ORDER BY m.serve_count, random()
LIMIT 1
"""


class _NothingServed(Exception):
    """A round that served nothing: its savepoint is rolled back, with any row it locked."""


async def serve_before_variants(connection: Connection, names: list[str]) -> serving.Instance:
    """One serve as it was made before variants, in the caller's transaction."""
    user, waited_for = f"u{next(_users)}", None
    while True:
        try:
            async with connection.transaction():
                if waited_for is not None:
                    await connection.execute(
                        "SELECT id FROM missions WHERE id = $1 FOR UPDATE", waited_for
                    )
                row = await connection.fetchrow(PRE_VARIANT_SERVE, names, user, TRACK, waited_for)
                if row is not None:
                    return serving.instance_from_row(row)
                raise _NothingServed
        except _NothingServed:
            pass
        waited_for = (
            None
            if waited_for is not None
            else await connection.fetchval(PRE_VARIANT_LEAST_SERVED_ID, names, user)
        )


async def closed_loop(
    serve_one: Callable[[], Awaitable[None]], clients: int, seconds: float
) -> Figures:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await serve_one()
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return figures(latencies, time.perf_counter() - start)


async def paced_loop(
    run_one: Callable[[], Awaitable[None]], clients: int, seconds: float, rate: float
) -> Figures:
    """As wrk at a rate: each client pauses at random (on average clients / rate) before each
    request, so that all together send about `rate` a second."""
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    mean = clients / rate

    async def client(draw: random.Random) -> None:
        while time.perf_counter() < deadline:
            await asyncio.sleep(draw.random() * 2 * mean)
            start = time.perf_counter()
            await run_one()
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(client(random.Random(n)) for n in range(clients)))
    return figures(latencies, time.perf_counter() - start)


def median_turn(turns: list[Figures]) -> Figures:
    """The turn of the median rate."""
    return sorted(turns, key=lambda turn: turn.rate)[len(turns) // 2]


async def load_history(database_url: str) -> None:
    print(
        f"loading {HISTORY_RETIRED:,} retired missions and {HISTORY_INSTANCES:,} instances...",
        flush=True,
    )
    # A connection of its own: the pool's statement time limit is for requests, not bulk loads.
    connection = await asyncpg.connect(database_url)
    await connection.execute(
        """INSERT INTO missions (domain, kind, language, title, brief, gold_files, test_files,
               sabotaged_files, bug_summary, proof, provider, qa_status, serve_count, max_serves,
               retired_at, retire_reason, content_hash)
           SELECT 'python-backend', 'technical', 'python', 'old ' || n, 'b', '{}', '{}', '{}', 's', '{}',
                  'bench', 'approved', 10, 10, now() - interval '30 days', 'served 10 times',
                  sha256(('history-' || n)::bytea)
           FROM generate_series(1, $1::int) n""",
        HISTORY_RETIRED,
    )
    await connection.execute(
        """INSERT INTO mission_instances (mission_id, user_id, track, domain, language, title, brief,
               files, serve_number, created_at)
           SELECT m.id, 'past-user-' || n, 'backend-engineer', 'python-backend', 'python', 't', 'b',
                  '{}', 1, now() - interval '30 days' + n * interval '1 second'
           FROM generate_series(1, $1::int) n
           JOIN missions m ON m.title = 'old ' || (1 + n % $2::int)""",
        HISTORY_INSTANCES,
        HISTORY_RETIRED,
    )
    await connection.execute("VACUUM ANALYZE missions")
    await connection.execute("VACUUM ANALYZE mission_instances")
    # The load's own writes are flushed now, not during the measurement that follows.
    await connection.execute("CHECKPOINT")
    await connection.close()


async def measure(
    url: str, database_url: str, key: str, arguments: argparse.Namespace
) -> dict[str, Figures]:
    domain_map = load(ROOT / "domain_map.yaml")
    domains = domain_map.domains_for(TRACK)
    pool = await create_pool(database_url, max_size=arguments.clients)

    settings = Settings()

    async def through_asyncpg() -> None:
        """The route's own serve, as its handler calls it (without a key, as wrk sends)."""
        answer = await requests.serve_or_enqueue(
            pool,
            asked(domain_map, f"u{next(_users)}", TRACK),
            limits=queue_limits(settings),
            heartbeat_timeout=settings.heartbeat_timeout,
        )
        assert answer.instance is not None, "nothing to serve: the stock ran out"

    async def before_variants() -> None:
        async with pool.acquire() as connection, connection.transaction():
            await serve_before_variants(connection, [domain.name for domain in domains])

    async def insert_and_commit() -> None:
        async with pool.acquire() as connection, connection.transaction():
            await connection.execute("INSERT INTO bench_floor (payload) VALUES ('x')")

    async def serving_phase(run: Awaitable[Figures]) -> Figures:
        async with stock_for(database_url, round(arguments.stock_rate * arguments.seconds)):
            return await run

    await pool.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial, payload text)")
    over_http = partial(wrk, url, key, path="/v1/serve", track=TRACK, clients=arguments.clients)
    # In turns, each turn all three: on these shared cores the machine's own pace drifts by a
    # third within a minute, and a ratio of two phases a minute apart measures the drift.
    https, ceilings, befores = [], [], []
    for _ in range(arguments.turns):
        https.append(await serving_phase(over_http(seconds=arguments.seconds)))
        ceilings.append(
            await serving_phase(closed_loop(through_asyncpg, arguments.clients, arguments.seconds))
        )
        befores.append(
            await serving_phase(closed_loop(before_variants, arguments.clients, arguments.seconds))
        )
    http, ceiling, before = median_turn(https), median_turn(ceilings), median_turn(befores)
    half = await serving_phase(over_http(seconds=arguments.seconds, rate=http.rate / 2))
    floor = await paced_loop(
        insert_and_commit, arguments.clients, arguments.seconds, rate=http.rate / 2
    )
    await pool.close()
    return {"http": http, "ceiling": ceiling, "before": before, "half": half, "floor": floor}


def report(title: str, found: dict[str, Figures]) -> None:
    print(f"\n{title}")
    print(found["http"].line("over HTTP, 32 clients"))
    print(found["ceiling"].line("through asyncpg (ceiling)"))
    print(found["before"].line("before variants, through asyncpg"))
    print(found["half"].line("over HTTP at half the peak rate"))
    print(found["floor"].line("INSERT + COMMIT at that rate"))
    ratio = found["http"].rate / found["ceiling"].rate
    kept = found["ceiling"].rate / found["before"].rate
    floor = found["half"].p99_ms / found["floor"].p99_ms
    print(
        f"HTTP / ceiling: {ratio:.2f} (goal at least 0.50)  ceiling / before variants: "
        f"{kept:.2f} (goal at least 0.90)"
    )
    print(
        f"p99 at half rate: {found['half'].p99_ms:.1f} ms, {floor:.1f}x the floor's "
        f"(goal under 25 ms, or within 2x the floor)"
    )


async def scratch_database(server: str, name: str) -> tuple[str, str]:
    """A scratch database `name`, migrated; its URL, and a candidate_app key."""
    database_url = await fresh_database(server, name)
    async with connected(database_url) as connection:
        await migrate.apply(connection)
        key = await create_key(connection, "candidate_app", "bench")
    return database_url, key


async def restock(database_url: str, serves: int) -> None:
    """Retire every mission a phase before left live, and store missions enough for `serves`
    serves, waiting for review: each a technical mission of MISSION_SERVES serves, its bugs
    each served to BUG_SHARE candidates, each from a rendering of its own (files of its own),
    as rendering jobs store them. Their files are the offline catalog's Python missions', as
    large as the missions a model writes."""
    async with connected(database_url) as connection:
        # The stock left unreviewed is rejected: the reviewer's partial index then holds only
        # this phase's, and an approval takes a millisecond however many phases ran before.
        await connection.execute(
            """UPDATE missions SET qa_status = 'rejected' WHERE qa_status = 'awaiting_review'"""
        )
        await connection.execute(
            """UPDATE missions SET retired_at = now(), retire_reason = 'the phase ended'
               WHERE retired_at IS NULL"""
        )
        # A file of the catalog's with a line added: a bug, or a rendering, of the same size.
        await connection.execute(
            """CREATE OR REPLACE FUNCTION pg_temp.marked(files jsonb, mark text) RETURNS jsonb
               LANGUAGE sql AS $$
                   SELECT files || jsonb_build_object(first.name,
                                                      (files->>first.name) || E'\\n# ' || mark)
                   FROM (SELECT min(name) AS name FROM jsonb_object_keys(files) name) first
               $$"""
        )
        await connection.execute(
            """INSERT INTO missions (domain, kind, language, title, brief, gold_files, test_files,
                   hidden_test_files, sabotaged_files, bug_summary, proof, provider, qa_status,
                   max_serves, content_hash)
               SELECT 'python-backend', 'technical', 'python', 'stock ' || n, 'Fix it.',
                      gold::jsonb, tests::jsonb, hidden::jsonb, pg_temp.marked(gold::jsonb, 'bug'),
                      'the bug', '{}', 'bench', 'awaiting_review', $2,
                      sha256(gen_random_uuid()::text::bytea)
               FROM generate_series(1, $1::int) n,
                    LATERAL (SELECT ($3::text[])[1 + n % cardinality($3)] AS gold,
                                    ($4::text[])[1 + n % cardinality($3)] AS tests,
                                    ($5::text[])[1 + n % cardinality($3)] AS hidden) catalog""",
            -(-serves // MISSION_SERVES),
            MISSION_SERVES,
            *(
                [json.dumps(getattr(mission, files)) for mission in CATALOG]
                for files in ("gold_files", "test_files", "hidden_test_files")
            ),
        )
        await connection.execute(
            """WITH variant AS (
                   INSERT INTO mission_variants (mission_id, sabotaged_files, bug_summary, proof,
                          provider, max_serves, rendered_serves, content_hash)
                   SELECT m.id, pg_temp.marked(m.gold_files, 'bug ' || b), 'bug ' || b, '{}',
                          'bench', $1, $1, sha256(('bug-' || b)::bytea)
                   FROM missions m CROSS JOIN generate_series(1, $2::int) b
                   WHERE m.qa_status = 'awaiting_review' AND m.retired_at IS NULL
                   RETURNING id, mission_id, sabotaged_files
               )
               INSERT INTO mission_renderings (variant_id, mission_id, number, files, gold_files,
                      test_files, hidden_test_files, renderer, proof, status, max_serves)
               SELECT v.id, v.mission_id, v.id * $1 + r,
                      pg_temp.marked(v.sabotaged_files, 'rendering ' || r) || m.test_files,
                      pg_temp.marked(m.gold_files, 'rendering ' || r), m.test_files,
                      m.hidden_test_files, 'renamed', '{}', 'ready', 1
               FROM variant v JOIN missions m ON m.id = v.mission_id
               CROSS JOIN generate_series(1, $1) r""",
            BUG_SHARE,
            MISSION_SERVES // BUG_SHARE,
        )
        # As autovacuum keeps a pool in service: a serve's plan, made once per session, is
        # then made from the stock's real sizes.
        await connection.execute("VACUUM ANALYZE missions, mission_variants, mission_renderings")


@asynccontextmanager
async def stock_for(database_url: str, serves: int) -> AsyncIterator[None]:
    """Serves on stock of their own, enough for `serves`, which must last them."""
    await restock(database_url, serves)
    with reviewing(database_url):
        yield
    if not await stock_lasted(database_url):
        raise SystemExit("the stock ran out during a phase: raise --stock-rate")


@contextmanager
def reviewing(database_url: str) -> Iterator[None]:
    """A reviewer approving stock as it is served (APPROVE), as the replenisher and QA keep a
    pool, so that a serve looks among as many missions as a pool holds and not among all the
    stock the phase needs. In a thread of its own: a phase's clients keep this process's event
    loop busy."""
    stop, started = threading.Event(), threading.Event()

    async def approve() -> None:
        async with connected(database_url) as connection:
            while not stop.is_set():
                await connection.execute(APPROVE, LIVE_MISSIONS, MISSION_SERVES)
                started.set()
                await asyncio.sleep(0.005)

    reviewer = threading.Thread(target=asyncio.run, args=(approve(),))
    reviewer.start()
    try:
        started.wait()
        yield
    finally:
        stop.set()
        reviewer.join()


async def stock_lasted(database_url: str) -> bool:
    """Whether the phase left stock unserved, and no serve found none (it ordered a job)."""
    async with connected(database_url) as connection:
        return bool(
            await connection.fetchval(
                """SELECT EXISTS (SELECT 1 FROM missions
                                  WHERE qa_status = 'awaiting_review' AND retired_at IS NULL)
                      AND NOT EXISTS (SELECT 1 FROM generation_jobs)"""
            )
        )


def serving_server(database_url: str) -> AbstractContextManager[str]:
    """One `warmpool serve --no-worker` on the database, whose users have no cap of jobs."""
    return running_server(
        database_url, Path(tempfile.mkdtemp()), overrides={"WARMPOOL_USER_CAP": "1000000"}
    )


async def main(arguments: argparse.Namespace) -> None:
    database_url, key = await scratch_database(arguments.database_url, "bench_serve")
    with serving_server(database_url) as url:
        empty = await measure(url, database_url, key, arguments)
        report("empty history", empty)
        await load_history(database_url)
        loaded = await measure(url, database_url, key, arguments)
        report(f"{HISTORY_INSTANCES:,} instances and {HISTORY_RETIRED:,} retired missions", loaded)
    for name in ("http", "ceiling"):
        change = loaded[name].rate / empty[name].rate - 1
        print(f"{name}: rate at a million rows {change:+.0%} of empty (goal within 20 %)")
    most = await served_most(database_url)
    print(
        f"most serves of one bug {most['bug']} (bug_share {BUG_SHARE}), of one rendering {most['rendering']}"
    )
    print(f"({os.cpu_count()} cores; the server, Postgres and this client share them)")


async def served_most(database_url: str) -> asyncpg.Record:
    async with connected(database_url) as connection:
        row = await connection.fetchrow(
            """SELECT (SELECT max(serve_count) FROM mission_variants) AS bug,
                      (SELECT max(serve_count) FROM mission_renderings) AS rendering"""
        )
    assert row is not None, "a select without FROM returns one row"
    return row


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument(
        "--turns",
        type=int,
        default=5,
        help="turns of the serve over HTTP, the ceiling and the serve before variants",
    )
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument(
        "--stock-rate",
        type=float,
        default=3000,
        help="serves a second that each phase's stock must last (more than the peak rate)",
    )
    asyncio.run(main(parser.parse_args()))
