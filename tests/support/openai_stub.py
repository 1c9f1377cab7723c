"""A small OpenAI-compatible HTTP server on 127.0.0.1, for driving the real SDK in tests.

`POST /v1/chat/completions` answers a structured-output request with a canned python mission
or sabotage (chosen by the request's json_schema name) and reports token usage. A test plans
the next answers (`stub.plan("rate_limited", "ok")`); once the plan runs out, every answer is
`ok`. Every request is recorded before it is answered, so tests can count the paid calls.

The Responses API in background mode, as OpenAI runs it: `POST /v1/responses` with
`background: true` answers at once with a `queued` response and its id; the response is
`in_progress` until `response_seconds` have passed since it was created (or, while `hold()`
is on, until `let_go()`), then ends as its planned behaviour says (`completed`, `incomplete`,
`failed`). `GET /v1/responses/{id}` reads it, `POST /v1/responses/{id}/cancel` cancels it
unless it has ended (and then answers it as it is), and a response the stub has `forget()`-ten
is 404, as one the provider no longer holds. Every created response is kept in `responses`,
so tests count what the stub was asked to generate.

The Batch API, as OpenAI runs it for `/v1/responses`: `POST /v1/files` takes a JSONL upload
(multipart, purpose `batch`) and `GET /v1/files/{id}/content` gives a file back; `POST
/v1/batches` validates its input file (a batch whose lines are not one request each, with a
custom id of its own, for the batch's endpoint, is `failed` with `errors`), then is
`in_progress` for `batch_seconds` (or, while `hold_batches()` is on, until `let_batches_go()`),
then ends as planned (`plan_batches`): `completed`, or `expired` after answering
`answered_before_expiry` lines (the rest go to the error file as `batch_expired`). Its answers
go to an output file (`{"id", "custom_id", "response": {"status_code", "request_id", "body"},
"error": null}` lines, the body a Response) and its failures to an error file; a line chosen by
`fail_lines` is answered with its planned behaviour (`server_error` as a 500 line in the error
file, say). `POST /v1/batches/{id}/cancel` cancels a batch under way (its lines still
unanswered go to the error file as `batch_cancelled`); `GET /v1/batches` lists them. Every
line answered with a usage is in `batch_generated()`, so tests count the batched calls the
provider billed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import uvicorn
from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.params import FromPath

from core.domains import Domain
from generation.drafts import MissionDraft

Behaviour = Literal[
    "ok",
    "slow",  # `ok`, after `delay_seconds`
    "rate_limited",  # 429, with Retry-After when `retry_after` is set
    "quota",  # 429 insufficient_quota
    "server_error",  # 500
    "malformed",  # 200, but the content is not JSON
    "wrong_shape",  # 200, valid JSON that does not match the schema
    "refusal",  # 200, message.refusal set
    "truncated",  # 200, finish_reason "length", the content cut off
    "dropped",  # responses only: created, then unknown to retrieve (404), as a lost response
]
ResponseStatus = Literal["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]
ENDED: frozenset[ResponseStatus] = frozenset({"completed", "failed", "cancelled", "incomplete"})

# Tokens the stub reports per answer, by json_schema name.
USAGE: dict[str, tuple[int, int]] = {"mission": (1200, 900), "sabotage": (1500, 400)}

GOLD_FILES = {
    "word_count.py": (
        "def word_count(text):\n"
        '    """Counts each word of `text`, ignoring case and surrounding punctuation."""\n'
        "    counts = {}\n"
        "    for raw in text.split():\n"
        '        word = raw.strip(".,;:!?").lower()\n'
        "        if word:\n"
        "            counts[word] = counts.get(word, 0) + 1\n"
        "    return counts\n"
    ),
}
TEST_FILES = {
    "test_word_count.py": (
        "from word_count import word_count\n\n\n"
        "def test_counts_repeated_words():\n"
        '    assert word_count("a b a") == {"a": 2, "b": 1}\n\n\n'
        "def test_ignores_case():\n"
        '    assert word_count("Go go GO") == {"go": 3}\n\n\n'
        "def test_strips_punctuation():\n"
        '    assert word_count("yes, yes!") == {"yes": 2}\n'
    ),
}
HIDDEN_TEST_FILES = {
    "test_word_count_more.py": (
        "from word_count import word_count\n\n\n"
        "def test_a_sentence():\n"
        '    assert word_count("The cat; the HAT.") == {"the": 2, "cat": 1, "hat": 1}\n'
    ),
}
SABOTAGED_FILES = {
    "word_count.py": GOLD_FILES["word_count.py"].replace(
        "counts.get(word, 0) + 1", "counts.get(word, 1)"
    ),
}

ANSWERS: dict[str, dict[str, Any]] = {
    "mission": {
        "title": "Counting words",
        "brief": "word_count() should count each word of a text. Find why the counts are off.",
        "gold_files": [{"path": p, "content": c} for p, c in GOLD_FILES.items()],
        "test_files": [{"path": p, "content": c} for p, c in TEST_FILES.items()],
        "hidden_test_files": [{"path": p, "content": c} for p, c in HIDDEN_TEST_FILES.items()],
    },
    "sabotage": {
        "sabotaged_files": [{"path": p, "content": c} for p, c in SABOTAGED_FILES.items()],
        "bug_summary": "word_count.py: a new count is never incremented; every word counts 1.",
        "grader_hint": "Look at how the dictionary value is updated inside the loop.",
    },
}

# What the provider tests ask the stub for, and the mission its answers make.
MODEL = "gpt-4o-mini"
DOMAIN = Domain(
    name="python-backend", kind="technical", language="python", target=1, retire_after=100
)
MISSION = MissionDraft(
    title=ANSWERS["mission"]["title"],
    brief=ANSWERS["mission"]["brief"],
    gold_files=GOLD_FILES,
    test_files=TEST_FILES,
    hidden_test_files=HIDDEN_TEST_FILES,
)


# A mission without code (language none, such as marketing-copy) and its sabotage.
COPY_ANSWERS: dict[str, dict[str, Any]] = {
    "mission": {
        "title": "Product page for a kettle",
        "brief": "Check the product page against the product sheet: the kettle holds 1.7 litres.",
        "gold_files": [
            {"path": "product-page.md", "content": "# Ember One\n\nHolds 1.7 litres.\n"}
        ],
        "test_files": [],
        "hidden_test_files": [],
    },
    "sabotage": {
        "sabotaged_files": [
            {"path": "product-page.md", "content": "# Ember One\n\nHolds 2 litres.\n"}
        ],
        "bug_summary": "product-page.md: the capacity says 2 litres; the sheet says 1.7.",
        "grader_hint": "Compare the capacity with the product sheet.",
    },
}


@dataclass
class Received:
    body: dict[str, Any]
    # The (prompt, completion) tokens the answer reported; None for an error answer.
    usage: tuple[int, int] | None = None

    @property
    def schema_name(self) -> str:
        if "text" in self.body:  # the Responses API
            return str(self.body["text"]["format"]["name"])
        return str(self.body["response_format"]["json_schema"]["name"])

    @property
    def prompt(self) -> str:
        if "input" in self.body:
            given = self.body["input"]
            return given if isinstance(given, str) else "\n".join(str(m["content"]) for m in given)
        return "\n".join(str(message["content"]) for message in self.body["messages"])


@dataclass
class BackgroundResponse:
    id: str
    received: Received
    behaviour: Behaviour
    created_at: float
    cancelled: bool = False
    forgotten: bool = False
    retrieved: int = 0

    def status(self, stub: OpenAIStub) -> ResponseStatus:
        if self.cancelled:
            return "cancelled"
        held = stub.holding and (not stub.held or self.received.schema_name in stub.held)
        if held or time.monotonic() < self.created_at + stub.response_seconds:
            return "in_progress"
        if self.behaviour == "server_error":
            return "failed"
        if self.behaviour == "truncated":
            return "incomplete"
        return "completed"


BatchStatus = Literal[
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
]
BatchEnding = Literal["completed", "expired"]


@dataclass
class StubFile:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int = 1_700_000_000

    def body(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class BatchLine:
    custom_id: str
    received: Received
    # What the line was answered with once its batch ended: None while it waits (or never ran).
    behaviour: Behaviour | None = None
    error_code: str | None = None


@dataclass
class StubBatch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, str]
    lines: list[BatchLine]
    ending: BatchEnding
    created_at: float
    errors: list[dict[str, Any]] = field(default_factory=list)
    cancelled: bool = False
    status: BatchStatus = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    retrieved: int = 0


@dataclass
class OpenAIStub:
    base_url: str = ""
    delay_seconds: float = 0.0
    retry_after: str | None = None
    # Overrides the canned answer's content, by json_schema name.
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    # Background responses: how long each is in progress, and every one created, by id.
    response_seconds: float = 0.0
    holding: bool = False
    # While holding, the json_schema names held; empty: every one.
    held: frozenset[str] = frozenset()
    responses: dict[str, BackgroundResponse] = field(default_factory=dict)
    # Files and batches: how long a batch is in progress, how many lines an expiring one
    # answers first, and which lines fail (a custom id -> its behaviour, or None).
    files: dict[str, StubFile] = field(default_factory=dict)
    batches: dict[str, StubBatch] = field(default_factory=dict)
    batch_seconds: float = 0.0
    holding_batches: bool = False
    answered_before_expiry: int = 0
    failing_lines: Callable[[str], Behaviour | None] = field(default_factory=lambda: _no_failure)
    # A batch creation answered with this 4xx error message instead (None: batches are made).
    refusing_batches: str | None = None
    # Missions of different requests differ (see `_answers`), so none is discarded as a copy.
    distinct: bool = False
    _plan: list[Behaviour] = field(default_factory=list)
    _batch_plan: list[BatchEnding] = field(default_factory=list)

    def plan(self, *behaviours: Behaviour) -> None:
        self._plan = list(behaviours)

    def plan_batches(self, *endings: BatchEnding) -> None:
        """How the next batches end, one each; once the plan runs out, `completed`."""
        self._batch_plan = list(endings)

    def fail_lines(self, failing: Callable[[str], Behaviour | None]) -> None:
        """Answer each batch line whose custom id `failing` maps to a behaviour with it."""
        self.failing_lines = failing

    def reset(self) -> None:
        self.delay_seconds, self.retry_after = 0.0, None
        self.response_seconds = 0.0
        self.let_go()
        self.answers.clear()
        self.received.clear()
        self.responses.clear()
        self._plan.clear()
        self.files.clear()
        self.batches.clear()
        self.batch_seconds, self.answered_before_expiry = 0.0, 0
        self.let_batches_go()
        self.failing_lines = _no_failure
        self.refusing_batches = None
        self.distinct = False
        self._batch_plan.clear()

    def hold_batches(self) -> None:
        """Every batch stays in progress until `let_batches_go()`."""
        self.holding_batches = True

    def let_batches_go(self) -> None:
        self.holding_batches = False

    def batch_generated(self, schema_name: str | None = None) -> list[BatchLine]:
        """The batch lines answered with a usage (billed), in order; of one json_schema name
        if given."""
        return [
            line
            for batch in self.batches.values()
            for line in batch.lines
            if line.received.usage is not None
            and (schema_name is None or line.received.schema_name == schema_name)
        ]

    def hold(self, *schema_names: str) -> None:
        """Every background response (of these json_schema names, if any) stays in progress
        until `let_go()`."""
        self.holding, self.held = True, frozenset(schema_names)

    def let_go(self) -> None:
        self.holding, self.held = False, frozenset()

    def forget(self, response_id: str) -> None:
        self.responses[response_id].forgotten = True

    def created(self, schema_name: str | None = None) -> list[BackgroundResponse]:
        """The background responses created, in order; of one json_schema name if given."""
        return [
            each
            for each in self.responses.values()
            if schema_name is None or each.received.schema_name == schema_name
        ]

    def reported_usage(self) -> tuple[int, int]:
        """Tokens reported over every answer that carried usage."""
        reported = [r.usage for r in self.received if r.usage is not None]
        return sum(u[0] for u in reported), sum(u[1] for u in reported)

    async def answer(self, request: Request[Any, Any, Any]) -> Response[Any]:
        received = Received(body=await request.json())
        self.received.append(received)
        behaviour = self._plan.pop(0) if self._plan else "ok"
        if behaviour == "slow":
            await asyncio.sleep(self.delay_seconds)
        if behaviour == "rate_limited":
            headers = {} if self.retry_after is None else {"retry-after": self.retry_after}
            return _error(429, "Rate limit reached for requests", "rate_limit_exceeded", headers)
        if behaviour == "quota":
            return _error(429, "You exceeded your current quota.", "insufficient_quota", {})
        if behaviour == "server_error":
            return _error(500, "The server had an error while processing your request.", None, {})
        received.usage = USAGE[received.schema_name]
        return Response(
            _completion(received.schema_name, behaviour, self._answers(received)), status_code=200
        )

    async def create_response(self, request: Request[Any, Any, Any]) -> Response[Any]:
        received = Received(body=await request.json())
        self.received.append(received)
        if not received.body.get("background") or received.body.get("store") is False:
            return _error(400, "this stub answers background responses only", None, {})
        behaviour = self._plan.pop(0) if self._plan else "ok"
        if behaviour == "slow":
            # Created only after the delay: a stop may come while the request is under way.
            await asyncio.sleep(self.delay_seconds)
        if behaviour == "rate_limited":
            headers = {} if self.retry_after is None else {"retry-after": self.retry_after}
            return _error(429, "Rate limit reached for requests", "rate_limit_exceeded", headers)
        if behaviour == "quota":
            return _error(429, "You exceeded your current quota.", "insufficient_quota", {})
        response = BackgroundResponse(
            id=f"resp_{uuid.uuid4().hex}",
            received=received,
            behaviour=behaviour,
            created_at=time.monotonic(),
        )
        self.responses[response.id] = response
        if behaviour == "dropped":
            response.forgotten = True
        return Response(self._response_body(response, "queued"), status_code=200)

    def retrieve_response(self, response_id: str) -> Response[Any]:
        response = self.responses.get(response_id)
        if response is None or response.forgotten:
            return _not_found(response_id)
        response.retrieved += 1
        return Response(self._response_body(response), status_code=200)

    def cancel_response(self, response_id: str) -> Response[Any]:
        response = self.responses.get(response_id)
        if response is None or response.forgotten:
            return _not_found(response_id)
        if response.status(self) not in ENDED:
            response.cancelled = True
        return Response(self._response_body(response), status_code=200)

    async def upload_file(self, request: Request[Any, Any, Any]) -> Response[Any]:
        form = await request.form()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, UploadFile) or purpose not in ("batch", "user_data"):
            return _error(400, "expected a file and a purpose of batch", "invalid_request", {})
        stub_file = StubFile(
            id=f"file-{uuid.uuid4().hex}",
            filename=upload.filename,
            purpose=str(purpose),
            content=await upload.read(),
        )
        self.files[stub_file.id] = stub_file
        return Response(stub_file.body(), status_code=200)

    def file_content(self, file_id: str) -> Response[Any]:
        stub_file = self.files.get(file_id)
        if stub_file is None:
            return _not_found(file_id, "File")
        return Response(stub_file.content, status_code=200, media_type="application/jsonl")

    async def create_batch(self, request: Request[Any, Any, Any]) -> Response[Any]:
        body = await request.json()
        input_file = self.files.get(body.get("input_file_id", ""))
        if input_file is None:
            return _not_found(body.get("input_file_id", ""), "File")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be 24h", "invalid_request", {})
        if body.get("endpoint") != "/v1/responses":
            return _error(400, "this stub batches /v1/responses only", "invalid_request", {})
        if self.refusing_batches is not None:
            return _error(400, self.refusing_batches, "invalid_request", {})
        batch = StubBatch(
            id=f"batch_{uuid.uuid4().hex}",
            input_file_id=input_file.id,
            endpoint=body["endpoint"],
            metadata=body.get("metadata") or {},
            lines=[],
            ending=self._batch_plan.pop(0) if self._batch_plan else "completed",
            created_at=time.monotonic(),
        )
        batch.lines, batch.errors = _batch_lines(input_file.content, batch.endpoint)
        if batch.errors:
            batch.status = "failed"
        self.batches[batch.id] = batch
        return Response(self._batch_body(batch), status_code=200)

    def retrieve_batch(self, batch_id: str) -> Response[Any]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return _not_found(batch_id, "Batch")
        batch.retrieved += 1
        self._advance(batch)
        return Response(self._batch_body(batch), status_code=200)

    def cancel_batch(self, batch_id: str) -> Response[Any]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return _not_found(batch_id, "Batch")
        self._advance(batch)
        if batch.status in ("validating", "in_progress"):
            batch.cancelled = True
            self._end(batch, answered=0, unanswered="batch_cancelled")
            batch.status = "cancelled"
        return Response(self._batch_body(batch), status_code=200)

    def list_batches(self) -> Response[Any]:
        data = [self._batch_body(batch) for batch in reversed(self.batches.values())]
        return Response(
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": False,
            },
            status_code=200,
        )

    def _advance(self, batch: StubBatch) -> None:
        """A batch under way as time and the knobs say: in progress, then ended as planned."""
        if batch.status == "validating":
            batch.status = "in_progress"
        if batch.status != "in_progress" or self.holding_batches:
            return
        if time.monotonic() < batch.created_at + self.batch_seconds:
            return
        if batch.ending == "expired":
            self._end(batch, answered=self.answered_before_expiry, unanswered="batch_expired")
            batch.status = "expired"
        else:
            self._end(batch, answered=len(batch.lines), unanswered="batch_expired")
            batch.status = "completed"

    def _end(self, batch: StubBatch, *, answered: int, unanswered: str) -> None:
        """Answer the first `answered` lines and write the output and error files."""
        outputs: list[str] = []
        errors: list[str] = []
        for index, line in enumerate(batch.lines):
            if index >= answered:
                line.error_code = unanswered
                errors.append(_line(line, None, _unanswered(unanswered)))
                continue
            line.behaviour = self.failing_lines(line.custom_id) or "ok"
            status, body = self._line_answer(line)
            (outputs if status == 200 else errors).append(_line(line, (status, body), None))
        batch.output_file_id = self._output_file(batch, "output", outputs)
        batch.error_file_id = self._output_file(batch, "errors", errors)

    def _line_answer(self, line: BatchLine) -> tuple[int, dict[str, Any]]:
        behaviour = line.behaviour or "ok"
        if behaviour in ("rate_limited", "quota"):
            return 429, {"error": _error_body("Rate limit reached for requests", behaviour)}
        if behaviour == "server_error":
            return 500, {"error": _error_body("The server had an error.", None)}
        response = BackgroundResponse(
            id=f"resp_{uuid.uuid4().hex}",
            received=line.received,
            behaviour=behaviour,
            created_at=0.0,
        )
        body = self._response_body(
            response, "incomplete" if behaviour == "truncated" else "completed"
        )
        body["background"] = False
        return 200, body

    def _output_file(self, batch: StubBatch, kind: str, lines: list[str]) -> str | None:
        if not lines:
            return None
        stub_file = StubFile(
            id=f"file-{uuid.uuid4().hex}",
            filename=f"{batch.id}_{kind}.jsonl",
            purpose="batch_output",
            content="".join(f"{each}\n" for each in lines).encode(),
        )
        self.files[stub_file.id] = stub_file
        return stub_file.id

    def _batch_body(self, batch: StubBatch) -> dict[str, Any]:
        ended = batch.status in ("completed", "expired", "cancelled", "failed")
        answered = [line for line in batch.lines if line.behaviour is not None]
        completed = sum(1 for line in answered if self._succeeded(line))
        usage = [line.received.usage for line in batch.lines if line.received.usage is not None]
        at = 1_700_000_000
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "model": "gpt-4o-mini-2024-07-18",
            "errors": ({"object": "list", "data": batch.errors} if batch.errors else None),
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": at,
            "in_progress_at": None if batch.status in ("validating", "failed") else at,
            "expires_at": at + 24 * 3600,
            "finalizing_at": at if batch.status == "completed" else None,
            "completed_at": at if batch.status == "completed" else None,
            "failed_at": at if batch.status == "failed" else None,
            "expired_at": at if batch.status == "expired" else None,
            "cancelling_at": at if batch.cancelled else None,
            "cancelled_at": at if batch.status == "cancelled" else None,
            "request_counts": {
                "total": len(batch.lines),
                "completed": completed,
                "failed": (len(batch.lines) - completed) if ended else 0,
            },
            "usage": {
                "input_tokens": sum(u[0] for u in usage),
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": sum(u[1] for u in usage),
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": sum(u[0] + u[1] for u in usage),
            },
            "metadata": batch.metadata,
        }

    def _answers(self, received: Received) -> dict[str, dict[str, Any]]:
        """The answers for a request: a copy mission for a domain without code (the prompt
        says `Language: none.`), else a python one, under the test's `answers`; with
        `distinct`, a mission's first gold file ends with a comment naming the request's seed,
        so missions of different jobs differ."""
        canned = COPY_ANSWERS if "Language: none." in received.prompt else ANSWERS
        answers = {**canned, **self.answers}
        if not self.distinct or received.schema_name != "mission":
            return answers
        mission = json.loads(json.dumps(answers["mission"]))
        first = mission["gold_files"][0]
        comment = _COMMENTS[first["path"].rpartition(".")[2]]
        seed = (received.body.get("metadata") or {}).get("seed", len(self.received))
        first["content"] += comment.format(f"mission of seed {seed}") + "\n"
        return {**answers, "mission": mission}

    def _succeeded(self, line: BatchLine) -> bool:
        return line.behaviour not in (None, "rate_limited", "quota", "server_error")

    def _response_body(
        self, response: BackgroundResponse, status: ResponseStatus | None = None
    ) -> dict[str, Any]:
        status = status or response.status(self)
        name = response.received.schema_name
        body: dict[str, Any] = {
            "id": response.id,
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "background": True,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": response.received.body.get("max_output_tokens"),
            "model": "gpt-4o-mini-2024-07-18",
            "output": [],
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "text": response.received.body["text"],
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "usage": None,
            "metadata": response.received.body.get("metadata") or {},
        }
        if status in ("queued", "in_progress", "cancelled"):
            return body
        input_tokens, output_tokens = USAGE[name]
        response.received.usage = USAGE[name]
        body["usage"] = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }
        if status == "failed":
            body["error"] = {
                "code": "server_error",
                "message": "The server had an error while processing your request.",
            }
            body["usage"] = None
            response.received.usage = None
            return body
        content, refusal, _ = _answer(name, response.behaviour, self._answers(response.received))
        if status == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        part: dict[str, Any] = (
            {"type": "refusal", "refusal": refusal}
            if refusal
            else {"type": "output_text", "text": content or "", "annotations": []}
        )
        body["output"] = [
            {
                "type": "message",
                "id": f"msg_{response.id.removeprefix('resp_')}",
                "status": "completed" if status == "completed" else "incomplete",
                "role": "assistant",
                "content": [part],
            }
        ]
        return body


_COMMENTS = {"py": "# {}", "js": "// {}", "sql": "-- {}", "md": "<!-- {} -->"}


def _no_failure(_custom_id: str) -> Behaviour | None:
    return None


def _batch_lines(content: bytes, endpoint: str) -> tuple[list[BatchLine], list[dict[str, Any]]]:
    """The requests of a batch's input file, or the errors that fail its validation."""
    lines: list[BatchLine] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, text in enumerate(content.decode().splitlines(), start=1):
        try:
            request = json.loads(text)
            custom_id, method, url, body = (
                request["custom_id"],
                request["method"],
                request["url"],
                request["body"],
            )
        except (ValueError, KeyError, TypeError):
            errors.append(_validation("invalid_json_line", "not a request line", number))
            continue
        if custom_id in seen:
            errors.append(_validation("duplicate_custom_id", f"{custom_id} again", number))
        elif method != "POST" or url != endpoint:
            errors.append(
                _validation("mismatched_endpoint", f"{url} in a batch of {endpoint}", number)
            )
        seen.add(custom_id)
        lines.append(BatchLine(custom_id=custom_id, received=Received(body=body)))
    if not lines and not errors:
        errors.append(_validation("empty_file", "the input file has no lines", None))
    return lines, errors


def _validation(code: str, message: str, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": line}


def _line(
    line: BatchLine, response: tuple[int, dict[str, Any]] | None, error: dict[str, Any] | None
) -> str:
    """One line of a batch's output or error file."""
    answered = None
    if response is not None:
        status, body = response
        answered = {"status_code": status, "request_id": uuid.uuid4().hex, "body": body}
    return json.dumps(
        {
            "id": f"batch_req_{uuid.uuid4().hex}",
            "custom_id": line.custom_id,
            "response": answered,
            "error": error,
        }
    )


def _unanswered(code: str) -> dict[str, str]:
    if code == "batch_expired":
        message = "This request could not be executed before the completion window expired."
    else:
        message = "This request was cancelled before it ran."
    return {"code": code, "message": message}


def _error_body(message: str, code: str | None) -> dict[str, Any]:
    return {"message": message, "type": code or "server_error", "param": None, "code": code}


def _answer(
    schema_name: str, behaviour: Behaviour, overrides: dict[str, dict[str, Any]]
) -> tuple[str | None, str | None, str]:
    """The answer's content, refusal and finish reason under `behaviour`."""
    content: str | None = json.dumps(overrides.get(schema_name, ANSWERS[schema_name]))
    refusal, finish_reason = None, "stop"
    if behaviour == "malformed":
        content = "Here is your mission: {title: Counting words"
    elif behaviour == "wrong_shape":
        content = json.dumps({"title": "Counting words"})
    elif behaviour == "refusal":
        content, refusal = None, "I'm sorry, I can't help with that."
    elif behaviour == "truncated":
        assert content is not None
        content, finish_reason = content[: len(content) // 2], "length"
    return content, refusal, finish_reason


def _completion(
    schema_name: str, behaviour: Behaviour, overrides: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    content, refusal, finish_reason = _answer(schema_name, behaviour, overrides)
    prompt_tokens, completion_tokens = USAGE[schema_name]
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int, message: str, code: str | None, headers: dict[str, str]) -> Response[Any]:
    kind = "server_error" if status >= 500 else (code or "requests")
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Response(body, status_code=status, headers=headers)


def _not_found(object_id: str, kind: str = "Response") -> Response[Any]:
    body = {
        "error": {
            "message": f"{kind} with id '{object_id}' not found.",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    return Response(body, status_code=404)


class StubServer:
    """Runs the stub's app with uvicorn on a free loopback port, on a thread of its own."""

    def __init__(self, stub: OpenAIStub) -> None:
        @post("/v1/chat/completions")
        async def chat_completions(request: Request[Any, Any, Any]) -> Response[Any]:
            return await stub.answer(request)

        @post("/v1/responses")
        async def create_response(request: Request[Any, Any, Any]) -> Response[Any]:
            return await stub.create_response(request)

        @get("/v1/responses/{response_id:str}")
        async def retrieve_response(response_id: FromPath[str]) -> Response[Any]:
            return stub.retrieve_response(response_id)

        @post("/v1/responses/{response_id:str}/cancel")
        async def cancel_response(response_id: FromPath[str]) -> Response[Any]:
            return stub.cancel_response(response_id)

        @get("/stub/created")
        async def created() -> list[dict[str, Any]]:
            return [
                {"id": each.id, "metadata": each.received.body.get("metadata") or {}}
                for each in stub.created()
            ]

        @post("/v1/files")
        async def upload_file(request: Request[Any, Any, Any]) -> Response[Any]:
            return await stub.upload_file(request)

        @get("/v1/files/{file_id:str}/content")
        async def file_content(file_id: FromPath[str]) -> Response[Any]:
            return stub.file_content(file_id)

        @post("/v1/batches")
        async def create_batch(request: Request[Any, Any, Any]) -> Response[Any]:
            return await stub.create_batch(request)

        @get("/v1/batches")
        async def list_batches() -> Response[Any]:
            return stub.list_batches()

        @get("/v1/batches/{batch_id:str}")
        async def retrieve_batch(batch_id: FromPath[str]) -> Response[Any]:
            return stub.retrieve_batch(batch_id)

        @post("/v1/batches/{batch_id:str}/cancel")
        async def cancel_batch(batch_id: FromPath[str]) -> Response[Any]:
            return stub.cancel_batch(batch_id)

        app = Litestar(
            [
                chat_completions,
                create_response,
                retrieve_response,
                cancel_response,
                upload_file,
                file_content,
                create_batch,
                list_batches,
                retrieve_batch,
                cancel_batch,
                created,
            ],
            request_max_body_size=64 * 1024 * 1024,
        )
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        port = self._socket.getsockname()[1]
        stub.base_url = f"http://127.0.0.1:{port}/v1"
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return
            if not self._thread.is_alive():
                break
            time.sleep(0.01)
        raise RuntimeError("the OpenAI stub server did not start")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


@contextmanager
def running_stub() -> Iterator[OpenAIStub]:
    """A stub, served until the end of the block."""
    stub = OpenAIStub()
    server = StubServer(stub)
    server.start()
    try:
        yield stub
    finally:
        server.stop()


@contextmanager
def stub_process(log: Path, *, response_seconds: float) -> Iterator[str]:
    """A stub in a process of its own (a load of many worker processes would starve a test's
    own process), each mission its own; its base URL until the end of the block. What it
    created is at `GET /stub/created`."""
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.openai_stub", str(response_seconds)],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    with process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line.startswith("serving "):
                raise RuntimeError(f"the OpenAI stub did not start: {log.read_text()}")
            yield line.removeprefix("serving ").strip()
        finally:
            process.terminate()
            process.wait(10)


def closed_port_url() -> str:
    """The base URL of a loopback port nothing listens on: connecting is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def main(response_seconds: str) -> None:
    """Serve a stub whose background responses take `response_seconds`, every mission its own,
    until SIGTERM."""
    stub = OpenAIStub(response_seconds=float(response_seconds), distinct=True)
    server = StubServer(stub)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    server.start()
    print(f"serving {stub.base_url}", flush=True)
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
