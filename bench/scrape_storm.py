"""Scrape storm benchmark: POST /v1/serve while many scrapers hammer GET /metrics, on 1,000,000
instances and 1,000,000 ledger rows.

    python bench/scrape_storm.py [--seconds 6] [--clients 32] [--scrapers 64] [--rounds 10]
                                 [--stock-rate 3000]
                                 [--database-url postgresql://...]

It loads bench/serve.py's history (1,000,000 instances of 100,000 retired missions) and
1,000,000 ledger rows of the last 30 days into a scratch database, starts one
`warmpool serve --no-worker` with its default settings (an open /metrics), and measures the peak
serve rate at `--clients` (wrk, as bench/serve.py). Each phase serves from stock of its own, as
bench/serve.py's do, enough for `--stock-rate` serves a second. Then it measures `--rounds`
rounds of two phases, quiet and in a storm of `--scrapers` unauthenticated scrapers (a second
wrk, each connection asking again as soon as it is answered), in turn first: in each, the
serves per second at `--clients` clients and the serves' p50/p99 at half that peak rate
(requests on a fixed schedule). It prints each phase, the storm's with its scrapes per second, then the
medians over the rounds, quiet and in the storm, and their ratio. Goal: serve p99 within 20 %
of quiet.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)

import argparse
import asyncio
import os
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import asyncpg

from bench.http_load import Figures, wrk, wrk_get
from bench.scratch import database_parser
from bench.serve import TRACK, load_history, scratch_database, serving_server, stock_for
from server.metrics import SCRAPE_SPACING_SECONDS

LEDGER_ROWS = 1_000_000
PHASES = ("quiet", "storm")


@dataclass
class Phase:
    peak: Figures
    half: Figures
    # The scrapes answered meanwhile; none in a quiet phase.
    scrapes: Figures | None


async def load_ledger(database_url: str) -> None:
    print(f"loading {LEDGER_ROWS:,} ledger rows...", flush=True)
    connection = await asyncpg.connect(database_url)
    await connection.execute(
        """INSERT INTO llm_calls (job_id, attempt, call_number, purpose, provider, model,
               started_at, finished_at, input_tokens, output_tokens, cost_usd, outcome)
           SELECT n, 1, 1, 'generate', 'bench', 'm', at, at + interval '30 seconds', 1200, 800,
                  0.0011, (ARRAY['ok', 'ok', 'ok', 'ok', 'failed', 'refused', 'malformed'])[n % 7 + 1]
           FROM generate_series(1, $1::int) n,
                LATERAL (SELECT now() - interval '30 days' + n * interval '2.5 seconds' AS at) call""",
        LEDGER_ROWS,
    )
    await connection.execute("VACUUM ANALYZE llm_calls")
    await connection.execute("CHECKPOINT")
    await connection.close()


async def phase(
    serves: Callable[..., Awaitable[Figures]],
    half_rate: float,
    storm: str | None,
    scrapers: int,
    seconds: float,
) -> Phase:
    """Serves at the peak, then at half rate; with `storm` (the server's URL), while `scrapers`
    scrape it from a second before the first to a second after the second."""

    async def both() -> tuple[Figures, Figures]:
        return await serves(), await serves(rate=half_rate)

    if storm is None:
        return Phase(*await both(), scrapes=None)

    async def once_the_storm_is_on() -> tuple[Figures, Figures]:
        await asyncio.sleep(1)
        return await both()

    scraped, (peak, half) = await asyncio.gather(
        wrk_get(storm, path="/metrics", clients=scrapers, seconds=2 * seconds + 2),
        once_the_storm_is_on(),
    )
    # The scrapes still waiting for their turns when the scrapers left are answered (to
    # nobody) before the next phase begins.
    await asyncio.sleep(scrapers * SCRAPE_SPACING_SECONDS + 1)
    return Phase(peak, half, scraped)


def report(found: Phase, name: str, clients: int) -> None:
    print(found.peak.line(f"serves, {clients} clients, {name}"))
    print(found.half.line(f"serves at half the peak, {name}"))
    if found.scrapes is not None:
        print(found.scrapes.line("scrapes meanwhile"))


async def main(arguments: argparse.Namespace) -> None:
    database_url, key = await scratch_database(arguments.database_url, "bench_scrape_storm")
    await load_history(database_url)
    await load_ledger(database_url)
    with serving_server(database_url) as url:
        serves = partial(
            wrk,
            url,
            key,
            path="/v1/serve",
            track=TRACK,
            clients=arguments.clients,
            seconds=arguments.seconds,
        )
        # A phase's stock: its serves at the peak, then at half rate.
        stock = round(2 * arguments.stock_rate * arguments.seconds)
        async with stock_for(database_url, stock):
            peak = await serves()
        print(peak.line(f"peak, {arguments.clients} clients (sets the half rate)"))

        async def measure(storm: str | None) -> Phase:
            async with stock_for(database_url, stock):
                return await phase(
                    serves,
                    peak.rate / 2,
                    storm,
                    scrapers=arguments.scrapers,
                    seconds=arguments.seconds,
                )

        rounds: list[dict[str, Phase]] = []
        for number in range(arguments.rounds):
            # Each first in turn, so that what the machine does meanwhile weighs on both alike.
            order = PHASES if number % 2 == 0 else PHASES[::-1]
            print(f"\nround {number + 1} of {arguments.rounds}: {' then '.join(order)}")
            found = {name: await measure(url if name == "storm" else None) for name in order}
            for name in order:
                report(found[name], name, arguments.clients)
            rounds.append(found)

    def middle(pick: Callable[[Phase], float], name: str) -> float:
        return statistics.median(pick(phases[name]) for phases in rounds)

    scrapes = middle(lambda storm: storm.scrapes.rate if storm.scrapes else 0, "storm")
    quiet_rate, storm_rate = (middle(lambda found: found.peak.rate, name) for name in PHASES)
    quiet_p99, storm_p99 = (middle(lambda found: found.half.p99_ms, name) for name in PHASES)
    print(
        f"\nmedians over {len(rounds)} rounds, quiet and in the storm ({scrapes:.0f} scrapes/s): "
        f"serves {quiet_rate:.0f}/s and {storm_rate:.0f}/s ({storm_rate / quiet_rate:.2f}x); "
        f"p99 at half the peak {quiet_p99:.1f} ms and {storm_p99:.1f} ms "
        f"({storm_p99 / quiet_p99:.2f}x, goal at most 1.20x)"
    )
    print(f"({os.cpu_count()} cores; the server, Postgres and the load generators share them)")


if __name__ == "__main__":
    parser = database_parser(__doc__)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--scrapers", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--stock-rate",
        type=float,
        default=3000,
        help="serves a second that each phase's stock must last (more than the peak rate)",
    )
    asyncio.run(main(parser.parse_args()))
