"""Starting the real `warmpool` command on a scratch database: a bad domain map, or a model
without a price, stops `serve` and `worker` at once with a message naming the fault;
`--log-format` switches the log between JSON lines and plain text; the worker says at start-up
which provider its missions come from, calling no model to find out; and a SIGTERM the moment
it has started stops it gracefully, with no error logged."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from generation.worker import worker_identity
from tests.support.polling import eventually
from tests.support.server import QUIET_MAP, ROOT, Process, environment, spawn

pytestmark = pytest.mark.slow

WORKER_NAME = "startup-test"
# One track, one domain that keeps no missions ready: a worker on it has nothing to make, so
# whatever it logs or calls comes from start-up alone.
OFFLINE = "missions come from the offline provider"
TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<logger>[\w.]+): (?P<message>.*)$"
)


# --- a bad domain map stops start-up ---------------------------------------------------------

FAULTS = {
    "track-names-an-unknown-domain": (
        QUIET_MAP.replace("[marketing-copy]", "[marketing-cpy]"),
        [
            "tracks.marketing-manager",
            "names domain 'marketing-cpy', which is not defined under domains",
            "did you mean 'marketing-copy'?",
        ],
    ),
    "retire-after-zero": (
        QUIET_MAP + "    retire_after: 0\n",
        [
            "domains.marketing-copy.retire_after",
            "expected a positive whole number of serves, got 0",
        ],
    ),
    "yaml-syntax-error": (
        # The track's list is never closed.
        QUIET_MAP.replace("[marketing-copy]", "[marketing-copy"),
        ["not valid YAML", "line 2,", "expected ',' or ']'"],
    ),
}


def refused(command: list[str], env: dict[str, str]) -> str:
    """What `warmpool COMMAND` wrote to stderr as it refused to start."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "server", *command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except subprocess.TimeoutExpired as timeout:
        pytest.fail(f"`warmpool {command[0]}` kept running: {timeout.stderr!r}")
    assert done.returncode == 2, (command, done.returncode, done.stderr)
    assert done.stdout == "", (command, done.stdout)
    return done.stderr


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_bad_domain_map_stops_start_up_naming_the_file_the_entry_and_the_fault(
    database_url: str, tmp_path: Path, fault: str
) -> None:
    text, fragments = FAULTS[fault]
    domain_map = tmp_path / f"{fault}.yaml"
    domain_map.write_text(text)
    env = environment(database_url, {"WARMPOOL_DOMAIN_MAP": str(domain_map)})

    commands = [["serve", "--port", "0"], ["worker"]]
    endings = await asyncio.gather(
        *(asyncio.to_thread(refused, command, env) for command in commands)
    )
    for command, stderr in zip(commands, endings, strict=True):
        # One message, first thing: no traceback, and nothing started before the check.
        assert stderr.startswith(f"warmpool: {domain_map}: "), (command, stderr)
        for fragment in fragments:
            assert fragment in stderr, (command, fragment, stderr)
        assert "Traceback" not in stderr, (command, stderr)
        assert "started" not in stderr, (command, stderr)


# --- a database migrated by another release stops start-up ----------------------------------

HISTORIES = {
    # A migration renumbered between releases: the database's 0027 is not this release's.
    "renumbered": (
        "UPDATE schema_migrations SET name = 'batches' WHERE version = 27",
        "the database's migration 0027 is 'batches', this release's is",
    ),
    "newer": (
        "INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')",
        "the database has migration 9999_from_the_future, which this release lacks",
    ),
}


@pytest.mark.parametrize("history", HISTORIES)
async def test_a_database_migrated_by_another_release_stops_start_up_before_any_migration(
    database_url: str, history: str
) -> None:
    change, message = HISTORIES[history]
    connection = await asyncpg.connect(database_url)
    try:
        last = await connection.fetchval("SELECT max(version) FROM schema_migrations")
        # The newest migration waits to be applied, so a start that went on would apply it.
        await connection.execute("DELETE FROM schema_migrations WHERE version = $1", last)
        await connection.execute(change)
        before = await connection.fetch("SELECT version, name FROM schema_migrations")
        for command in (["migrate"], ["worker"]):
            stderr = await asyncio.to_thread(refused, command, environment(database_url))
            # One line says why, last: nothing started after it.
            assert stderr.splitlines()[-1].startswith(f"warmpool: {message}"), (command, stderr)
            assert "Traceback" not in stderr, (command, stderr)
        after = await connection.fetch("SELECT version, name FROM schema_migrations")
        assert sorted(map(tuple, after)) == sorted(map(tuple, before)), "nothing was applied"
    finally:
        await connection.close()


# --- running a worker briefly ----------------------------------------------------------------


@dataclass
class WorkerRun:
    name: str
    pid: int
    returncode: int
    stdout: str
    stderr: str

    @property
    def worker_id(self) -> str:
        return worker_identity(self.name, socket.gethostname(), self.pid)

    def events(self) -> list[dict[str, Any]]:
        """Every line of stderr, as the JSON object it must be; none of them an error."""
        events = [json.loads(line) for line in self.stderr.splitlines()]
        assert events, "the worker logged nothing"
        for event in events:
            assert isinstance(event, dict), event
            assert {"time", "level", "logger", "message"} <= event.keys(), event
            assert event["level"] in {"debug", "info", "warning"}, event
        return events


def start_worker(env: dict[str, str], flags: tuple[str, ...], out_dir: Path) -> Process:
    """`warmpool worker`, its stdout and its stderr (the log stream) written apart; the
    process's `log` is stderr, its stdout beside it with the suffix `.stdout`."""
    stderr = out_dir / f"worker-{uuid.uuid4().hex[:8]}.stderr"
    return spawn(
        [sys.executable, "-m", "server", "worker", *flags],
        env,
        stderr,
        stdout=stderr.with_suffix(".stdout"),
    )


async def started(process: Process, name: str) -> None:
    """Once the worker has logged that it started."""
    line = f"worker {worker_identity(name, socket.gethostname(), process.popen.pid)} started"

    async def up() -> bool:
        assert process.popen.poll() is None, f"the worker did not start:\n{process.output()}"
        return line in process.output()

    await eventually(up, 60, "the worker to start", every=0.02)


async def run_worker(
    database_url: str,
    tmp_path: Path,
    *flags: str,
    name: str = WORKER_NAME,
    overrides: dict[str, str] | None = None,
) -> WorkerRun:
    """`warmpool worker` on the quiet map, until it logs that it started; then, at once
    (its first replenishment pass may still be under way), SIGTERM."""
    domain_map = tmp_path / "quiet.yaml"
    domain_map.write_text(QUIET_MAP)
    env = environment(
        database_url,
        {
            "WARMPOOL_DOMAIN_MAP": str(domain_map),
            "WARMPOOL_WORKER_NAME": name,
            **(overrides or {}),
        },
    )
    process = start_worker(env, flags, tmp_path)
    pid = process.popen.pid
    try:
        await started(process, name)
    finally:
        returncode = await asyncio.to_thread(process.stop, signal.SIGTERM, 15)
    stdout = process.log.with_suffix(".stdout").read_text()
    return WorkerRun(name, pid, returncode, stdout, process.output())


async def test_a_second_worker_under_a_name_a_live_one_holds_is_refused(
    database_url: str, tmp_path: Path
) -> None:
    domain_map = tmp_path / "quiet.yaml"
    domain_map.write_text(QUIET_MAP)
    env = environment(
        database_url, {"WARMPOOL_DOMAIN_MAP": str(domain_map), "WARMPOOL_WORKER_NAME": "shared"}
    )
    holder = start_worker(env, (), tmp_path)
    try:
        await started(holder, "shared")
        stderr = await asyncio.to_thread(refused, ["worker"], env)
    finally:
        assert await asyncio.to_thread(holder.stop, signal.SIGTERM, 15) == 0
    last = stderr.splitlines()[-1]
    assert last.startswith("warmpool: worker name 'shared' is held by shared:"), stderr
    assert "WARMPOOL_WORKER_NAME" in last
    assert "Traceback" not in stderr
    # A holder that stopped gave its name up: the next one starts at once.
    assert (await run_worker(database_url, tmp_path, name="shared")).returncode == 0


# --- --log-format ----------------------------------------------------------------------------


async def test_log_format_switches_between_json_lines_and_text_with_the_same_messages(
    database_url: str, tmp_path: Path
) -> None:
    as_json, as_text = await asyncio.gather(
        run_worker(database_url, tmp_path),  # stderr is a file: JSON by default
        run_worker(database_url, tmp_path, "--log-format", "text", name=f"{WORKER_NAME}-text"),
    )
    assert (as_json.returncode, as_text.returncode) == (0, 0)
    # Logs go to stderr; a worker prints nothing for the person who ran it.
    assert (as_json.stdout, as_text.stdout) == ("", "")

    # JSON: every line an object with its fields; `extra=` fields are fields of their own.
    events = as_json.events()
    [stopped] = [event for event in events if event["message"].endswith(" stopped")]
    assert stopped["worker_id"] == as_json.worker_id, stopped

    # Text: no line is JSON; each record is "time LEVEL logger: message [extra fields]".
    lines = as_text.stderr.splitlines()
    assert not [line for line in lines if is_json_object(line)], lines
    assert not [line for line in lines if " ERROR " in line or " CRITICAL " in line], lines
    records = [match for match in map(TEXT_LINE.match, lines) if match]
    assert records, lines
    stopped_line = f"worker {as_text.worker_id} stopped [worker_id={as_text.worker_id}]"
    assert stopped_line in [record["message"] for record in records], lines

    # The same messages, in the same order, at the same level from the same logger.
    from_json = landmarks(
        as_json.worker_id, [(e["level"], e["logger"], e["message"]) for e in events]
    )
    from_text = landmarks(
        as_text.worker_id,
        [(r["level"].lower(), r["logger"], r["message"].split(" [")[0]) for r in records],
    )
    expected = [
        ("info", "server.generation_wiring", "no OPENAI_API_KEY: " + OFFLINE),
        ("info", "server.runtime", "worker ID started: global cap"),
        ("info", "warmpool", "stopping on a signal"),
        ("info", "server.runtime", "worker ID stopped"),
    ]
    assert len(from_json) == len(expected), events
    for (level, logger, message), (want_level, want_logger, start) in zip(
        from_json, expected, strict=True
    ):
        assert (level, logger) == (want_level, want_logger), message
        assert message.startswith(start), (message, start)
    assert from_text == from_json, lines


def is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def landmarks(worker_id: str, records: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The records that mark the provider, the start and the stop, with the worker's id
    written ID."""
    marks = []
    for level, logger, message in records:
        neutral = message.replace(worker_id, "ID")
        if OFFLINE in neutral or re.fullmatch(
            r"worker ID (started|stopped).*|stopping on a.*", neutral
        ):
            marks.append((level, logger, neutral))
    return marks


# --- the provider the worker announces -------------------------------------------------------


async def test_without_an_openai_key_the_worker_says_missions_come_from_the_offline_provider(
    database_url: str, tmp_path: Path
) -> None:
    run = await run_worker(database_url, tmp_path)
    assert run.returncode == 0, run.stderr
    events = run.events()
    texts = [event["message"] for event in events]
    [offline] = [event for event in events if OFFLINE in event["message"]]
    assert offline["logger"] == "server.generation_wiring"
    assert offline["message"].startswith("no OPENAI_API_KEY: "), offline
    assert not any("openai provider" in text for text in texts), texts
    # Said once, before the worker starts.
    [started] = [
        i for i, text in enumerate(texts) if text.startswith(f"worker {run.worker_id} started")
    ]
    assert texts.index(offline["message"]) < started, texts


@pytest.fixture
def silent_model() -> Iterator[tuple[str, socket.socket]]:
    """A loopback port that listens but never answers: the base URL of a model API that no
    start-up should call. A connection attempt would wait in its backlog, to be counted."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", listener


async def test_with_an_openai_key_the_worker_names_the_model_and_calls_nothing_at_start_up(
    database_url: str, tmp_path: Path, silent_model: tuple[str, socket.socket]
) -> None:
    base_url, listener = silent_model
    run = await run_worker(
        database_url,
        tmp_path,
        overrides={
            "OPENAI_API_KEY": f"sk-test-{uuid.uuid4().hex}",
            "OPENAI_BASE_URL": base_url,
            "WARMPOOL_MODEL": "gpt-4.1-nano",
        },
    )
    assert run.returncode == 0, run.stderr
    messages = [event["message"] for event in run.events()]
    assert not any("offline" in message for message in messages), messages
    assert (
        "missions come from the openai provider: model gpt-4.1-nano at 127.0.0.1, background "
        "calls, batch off" in messages
    )
    listener.setblocking(False)
    try:
        connection, _ = listener.accept()
    except BlockingIOError:
        return
    connection.close()
    pytest.fail("the worker connected to the model API at start-up")


async def test_a_model_without_a_price_stops_start_up_with_the_fix(
    database_url: str, tmp_path: Path
) -> None:
    env = environment(
        database_url,
        {"OPENAI_API_KEY": f"sk-test-{uuid.uuid4().hex}", "WARMPOOL_MODEL": "gpt-unpriced"},
    )
    endings = await asyncio.gather(
        *(asyncio.to_thread(refused, command, env) for command in (["serve"], ["worker"]))
    )
    for stderr in endings:
        assert stderr.startswith("warmpool: no price for model 'gpt-unpriced' in "), stderr
        assert "WARMPOOL_PRICES_FILE" in stderr, stderr
        assert "Traceback" not in stderr, stderr


async def test_batching_a_model_without_a_batch_price_stops_start_up_with_the_fix(
    database_url: str, tmp_path: Path
) -> None:
    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text("our-model: {input: 0.5, output: 2.0}\n")
    env = environment(
        database_url,
        {
            "OPENAI_API_KEY": f"sk-test-{uuid.uuid4().hex}",
            "WARMPOOL_MODEL": "our-model",
            "WARMPOOL_PRICES_FILE": str(prices_file),
            "WARMPOOL_BATCH": "replenish",
        },
    )
    stderr = await asyncio.to_thread(refused, ["worker"], env)
    assert stderr.startswith("warmpool: no batch price for model 'our-model' in "), stderr
    assert "WARMPOOL_BATCH=off" in stderr, stderr
