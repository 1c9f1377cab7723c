"""What the benchmarks share: their command line, a scratch database and a proof work folder."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from server.database import with_database


def database_parser(doc: str) -> argparse.ArgumentParser:
    """A parser whose help is the benchmark's docstring, with --database-url: a server where the
    benchmark may create its own scratch databases (default: as scripts/test finds one)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "WARMPOOL_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    return parser


async def fresh_database(server: str, name: str) -> str:
    """The URL of database `name` on `server`, made anew and empty."""
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return with_database(server, name)


def proof_folder() -> Path:
    # Under /tmp with others allowed through: proofs run as the sandbox uids.
    folder = Path(tempfile.mkdtemp(prefix="warmpool-bench-"))
    folder.chmod(0o755)
    return folder


@asynccontextmanager
async def connected(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own, outside any pool (and its statement time limit)."""
    connection = await asyncpg.connect(database_url)
    try:
        yield connection
    finally:
        await connection.close()
