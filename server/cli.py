"""The `warmpool` command: serve, worker, toolchain, migrate, keys create, status."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import signal
import sys
from collections.abc import Iterator, Sequence

import uvicorn

from core import domains
from core.domains import DomainMapError
from generation.openai.prices import PriceError
from generation.registry import WorkerNameTaken
from qa import pgtap, toolchain
from server import database, logs, migrate, places
from server.app import create_app
from server.auth import ROLES, create_key
from server.generation_wiring import check_prices, opened_provider
from server.runtime import running_worker
from server.settings import Settings, SettingsError, from_environment
from server.status import print_status

log = logging.getLogger("warmpool")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        settings = from_environment()
        # Logs go to stderr; stdout carries what a command prints for the person who ran it.
        logs.configure(settings, getattr(arguments, "log_format", None))
        return int(arguments.run(settings, arguments) or 0)
    except (
        SettingsError,
        DomainMapError,
        PriceError,
        WorkerNameTaken,
        migrate.SchemaMismatch,
    ) as error:
        print(f"warmpool: {error}", file=sys.stderr)
        return 2
    except database.DatabaseUnreachable as error:
        # At start-up; once running, an outage is waited out instead.
        print(f"warmpool: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="warmpool", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    logging_options = argparse.ArgumentParser(add_help=False)
    logging_options.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        help="one JSON object per line, or text (default: text on a terminal, else json)",
    )

    serve = commands.add_parser(
        "serve", parents=[logging_options], help="the HTTP API, plus a worker and the scheduler"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-worker", action="store_true", help="serve the API only")
    serve.set_defaults(run=_serve)

    worker = commands.add_parser(
        "worker", parents=[logging_options], help="dispatcher and generation only"
    )
    worker.set_defaults(run=_worker)

    toolchain_command = commands.add_parser(
        "toolchain",
        help="install what proofs run (pytest, Jest, pgTAP for the embedded PostgreSQL), once",
    )
    toolchain_command.set_defaults(run=_toolchain)

    migrate_command = commands.add_parser("migrate", help="bring the schema up to date")
    migrate_command.set_defaults(run=_migrate)

    keys = commands.add_parser("keys", help="API keys").add_subparsers(
        required=True, metavar="ACTION"
    )
    create = keys.add_parser("create", help="create a key; prints it as the last line")
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument("--name", default=None)
    create.set_defaults(run=_keys_create)

    status = commands.add_parser("status", help="queue and pool at a glance")
    status.set_defaults(run=_status)
    return parser


def _serve(settings: Settings, arguments: argparse.Namespace) -> int:
    if not arguments.no_worker:
        check_prices(settings)
    app = create_app(settings, run_worker=not arguments.no_worker)
    config = uvicorn.Config(
        app,
        host=arguments.host,
        port=arguments.port,
        log_config=None,
        access_log=False,
        lifespan="on",
        # The standard loop: proof sandboxes start processes as another user, which uvloop's
        # subprocess support does not offer.
        loop="asyncio",
        http="httptools",
        # On SIGTERM: stop accepting, let open requests finish within the grace, then run the
        # lifespan's shutdown (the worker's own grace, if this process runs one).
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace_seconds),
    )
    server = _Server(config)
    server.run()
    # Not started: the lifespan refused (a worker name held by a live process, say), as logged.
    return 0 if server.started else 1


class _Server(uvicorn.Server):
    """After its graceful shutdown on SIGTERM or SIGINT, uvicorn raises the signal again, which
    ends the process before its exit handlers run: the embedded PostgreSQL would be left
    running. This server catches the same signals and returns, and the process exits 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {signum: signal.signal(signum, self.handle_exit) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _worker(settings: Settings, _: argparse.Namespace) -> int:
    check_prices(settings)
    asyncio.run(_run_worker(settings))
    return 0


async def _run_worker(settings: Settings) -> None:
    # Caught from the first moment, so a signal during start-up never kills the process
    # halfway: the worker then does not start, or, once started, stops gracefully.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    domain_map = domains.load(settings.domain_map)
    url = await database.resolve_url(settings)
    db = await database.create_pool(url)
    try:
        async with db.acquire() as connection:
            await migrate.apply(connection)
        if stop.is_set():
            log.info("stopped on a signal during start-up")
            return
        async with (
            opened_provider(settings) as chosen,
            running_worker(db, url, settings, domain_map, chosen),
        ):
            await stop.wait()
            log.info("stopping on a signal")
    finally:
        await db.close()


def _toolchain(settings: Settings, _: argparse.Namespace) -> int:
    """Needs PyPI, the npm registry and Debian's archive; proofs afterwards need none."""
    root = places.of(settings.data_dir).toolchain
    try:
        tools = toolchain.install(root)
        pgtap.install(database.embedded_extension_dir(), root)
    except toolchain.ToolchainError as error:
        print(f"warmpool: {error}", file=sys.stderr)
        return 1
    for line in toolchain.report(tools):
        print(line)
    print(f"  pgtap:  in the embedded PostgreSQL ({database.embedded_extension_dir()})")
    return 0


def _migrate(settings: Settings, _: argparse.Namespace) -> int:
    async def run() -> None:
        connection = await database.connect(settings)
        try:
            applied = await migrate.apply(connection)
            version = await migrate.current_version(connection)
        finally:
            await connection.close()
        print(f"schema at version {version} ({len(applied)} migration(s) applied)")

    asyncio.run(run())
    return 0


def _keys_create(settings: Settings, arguments: argparse.Namespace) -> int:
    async def run() -> str:
        connection = await database.connect(settings)
        try:
            await migrate.apply(connection)
            return await create_key(connection, arguments.role, arguments.name or arguments.role)
        finally:
            await connection.close()

    key = asyncio.run(run())
    print(f"created a {arguments.role} key; it is shown only now:")
    print(key)
    return 0


def _status(settings: Settings, _: argparse.Namespace) -> int:
    async def run() -> None:
        connection = await database.connect(settings)
        try:
            await print_status(connection, settings)
        finally:
            await connection.close()

    asyncio.run(run())
    return 0
