"""Log lines: JSON with the structured fields, or text for a terminal, and never a secret."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from server import logs
from server.settings import REDACTED, Settings, SettingsError, from_environment


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("generation.worker", logging.INFO, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_json_line_carries_the_message_and_the_extra_fields() -> None:
    line = logs.JsonFormatter().format(record("job %s failed", 7, job_id=7, attempt=2))
    event = json.loads(line)
    assert event["message"] == "job 7 failed"
    assert (event["level"], event["logger"]) == ("info", "generation.worker")
    assert (event["job_id"], event["attempt"]) == (7, 2)
    assert event["time"].endswith("+00:00")


def test_a_json_line_holds_an_exception_as_one_field() -> None:
    try:
        raise ValueError("broken")
    except ValueError:
        made = logging.LogRecord("x", logging.ERROR, __file__, 1, "crashed", (), None)
        made.exc_info = sys.exc_info()
    [line] = logs.JsonFormatter().format(made).splitlines()
    assert "ValueError: broken" in json.loads(line)["exception"]


def test_a_text_line_ends_with_the_fields() -> None:
    line = logs.TextFormatter().format(record("claimed job 7", job_id=7, attempt=1))
    assert line.endswith("INFO generation.worker: claimed job 7 [job_id=7 attempt=1]")


def test_every_secret_is_redacted_however_it_is_spelled() -> None:
    settings = Settings(
        openai_api_key="sk-live-abc",
        secret_key="s" * 40,
        metrics_token="m" * 20,
        database_url="postgresql://warmpool:pa%22ss@db/warmpool",
    )
    redacting = logs.Redacting(logs.JsonFormatter(), logs.secrets_of(settings))
    line = redacting.format(
        record(
            "%s",
            f'key sk-live-abc, password pa%22ss or pa"ss, secret {"s" * 40}, token {"m" * 20}',
        )
    )
    for secret in ("sk-live-abc", "pa%22ss", 'pa\\"ss', "s" * 40, "m" * 20):
        assert secret not in line
    assert json.loads(line)["message"].count(REDACTED) == 5


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    logging.captureWarnings(False)
    root.handlers[:] = handlers
    root.setLevel(level)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(
    ("stream", "log_format", "starts"),
    [(io.StringIO(), None, "{"), (Terminal(), None, "20"), (Terminal(), "json", "{")],
)
def test_the_format_is_json_unless_the_stream_is_a_terminal_or_it_is_chosen(
    stream: io.StringIO, log_format: logs.LogFormat | None, starts: str
) -> None:
    logs.configure(Settings(), log_format, stream=stream)
    logging.getLogger("test").info("hello")
    assert stream.getvalue().startswith(starts)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("WARMPOOL_SECRET_KEY", "too-short-but-secret"),
        ("WARMPOOL_DATABASE_URL", "mysql://warmpool:hunter2@db/warmpool"),
    ],
)
def test_a_bad_setting_is_named_without_showing_its_secret(variable: str, value: str) -> None:
    with pytest.raises(SettingsError) as raised:
        from_environment({variable: value})
    assert variable in str(raised.value)
    assert "too-short-but-secret" not in str(raised.value)
    assert "hunter2" not in str(raised.value)
