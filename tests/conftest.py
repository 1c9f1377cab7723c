from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.app import create_app
from server.auth import Role
from server.database import create_pool
from server.settings import Settings
from tests.fuzz import tally
from tests.support import fleet, postgres
from tests.support.openai_stub import OpenAIStub, running_stub
from tests.support.server import ROOT, create_keys


@pytest.fixture(scope="session")
async def postgres_server() -> str:
    return await postgres.server_url()


@pytest.fixture(scope="session")
async def template(postgres_server: str) -> str:
    return await postgres.ensure_template(postgres_server)


@pytest.fixture(scope="session")
async def clones(postgres_server: str, template: str) -> AsyncIterator[postgres.Clones]:
    clones = postgres.Clones(postgres_server, template)
    yield clones
    await clones.close()


@pytest.fixture
async def database_url(clones: postgres.Clones) -> AsyncIterator[str]:
    name, url = await clones.take()
    yield url
    clones.give_back(name)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(database_url, max_size=30)
    yield pool
    await pool.close()


@pytest.fixture
async def standing_worker(database_url: str) -> None:
    """A live worker's row that can make every domain, for tests that enqueue users'
    generations with no worker running."""
    await fleet.standing_worker(database_url)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return msgspec.structs.replace(
        Settings(),
        database_url=database_url,
        domain_map=ROOT / "domain_map.yaml",
        worker_name="test-host",
        # A runtime a test stops releases at once what still runs.
        shutdown_grace_seconds=0.0,
    )


@pytest.fixture
async def keys(database_url: str) -> dict[Role, str]:
    return await create_keys(database_url)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncTestClient[Litestar]]:
    # Over https, as in production: the reviewer UI's session cookie is Secure.
    async with AsyncTestClient(create_app(settings), base_url="https://testserver.local") as client:
        yield client


@pytest.fixture(scope="session")
def openai_stub_server() -> Iterator[OpenAIStub]:
    """The OpenAI stub, served for the whole session."""
    with running_stub() as stub:
        yield stub


@pytest.fixture
def openai_stub(openai_stub_server: OpenAIStub) -> OpenAIStub:
    """The stub, with nothing planned or recorded."""
    openai_stub_server.reset()
    return openai_stub_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # scripts/test runs the suite in two pytest-xdist workers: the heavy tests go to one of
    # them, one at a time, so that no two of them share the cores and none of their timings
    # (reclaims, recoveries) pays for another's load.
    for item in items:
        if item.get_closest_marker("heavy"):
            item.add_marker(pytest.mark.xdist_group("heavy"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    # An xdist worker hands what its fuzz tests ran to the controller, which prints it.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["fuzz_answers"] = [[*key, count] for key, count in tally.ANSWERS.items()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    for role, operation, status, count in node.workeroutput.get("fuzz_answers", []):
        tally.record(role, operation, status, count)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = tally.report()
    if lines:
        terminalreporter.section("fuzz cases run")
        for line in lines:
            terminalreporter.write_line(line)
