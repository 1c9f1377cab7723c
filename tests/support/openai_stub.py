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
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from litestar import Litestar, Request, Response, get, post
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
    _plan: list[Behaviour] = field(default_factory=list)

    def plan(self, *behaviours: Behaviour) -> None:
        self._plan = list(behaviours)

    def reset(self) -> None:
        self.delay_seconds, self.retry_after = 0.0, None
        self.response_seconds = 0.0
        self.let_go()
        self.answers.clear()
        self.received.clear()
        self.responses.clear()
        self._plan.clear()

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
        return Response(_completion(received.schema_name, behaviour, self.answers), status_code=200)

    async def create_response(self, request: Request[Any, Any, Any]) -> Response[Any]:
        received = Received(body=await request.json())
        self.received.append(received)
        if not received.body.get("background") or received.body.get("store") is False:
            return _error(400, "this stub answers background responses only", None, {})
        behaviour = self._plan.pop(0) if self._plan else "ok"
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
        content, refusal, _ = _answer(name, response.behaviour, self.answers)
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


def _not_found(response_id: str) -> Response[Any]:
    body = {
        "error": {
            "message": f"Response with id '{response_id}' not found.",
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

        app = Litestar([chat_completions, create_response, retrieve_response, cancel_response])
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


def closed_port_url() -> str:
    """The base URL of a loopback port nothing listens on: connecting is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
