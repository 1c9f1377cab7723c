"""A small OpenAI-compatible HTTP server on 127.0.0.1, for driving the real SDK in tests.

`POST /v1/chat/completions` answers a structured-output request with a canned python mission
or sabotage (chosen by the request's json_schema name) and reports token usage. A test plans
the next answers (`stub.plan("rate_limited", "ok")`); once the plan runs out, every answer is
`ok`. Every request is recorded before it is answered, so tests can count the paid calls.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from litestar import Litestar, Request, Response, post

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
]

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


@dataclass
class Received:
    body: dict[str, Any]
    # The (prompt, completion) tokens the answer reported; None for an error answer.
    usage: tuple[int, int] | None = None

    @property
    def schema_name(self) -> str:
        return str(self.body["response_format"]["json_schema"]["name"])

    @property
    def prompt(self) -> str:
        return "\n".join(str(message["content"]) for message in self.body["messages"])


@dataclass
class OpenAIStub:
    base_url: str = ""
    delay_seconds: float = 0.0
    retry_after: str | None = None
    # Overrides the canned answer's content, by json_schema name.
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    _plan: list[Behaviour] = field(default_factory=list)

    def plan(self, *behaviours: Behaviour) -> None:
        self._plan = list(behaviours)

    def reset(self) -> None:
        self.delay_seconds, self.retry_after = 0.0, None
        self.answers.clear()
        self.received.clear()
        self._plan.clear()

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


def _completion(
    schema_name: str, behaviour: Behaviour, overrides: dict[str, dict[str, Any]]
) -> dict[str, Any]:
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


class StubServer:
    """Runs the stub's app with uvicorn on a free loopback port, on a thread of its own."""

    def __init__(self, stub: OpenAIStub) -> None:
        @post("/v1/chat/completions")
        async def chat_completions(request: Request[Any, Any, Any]) -> Response[Any]:
            return await stub.answer(request)

        app = Litestar([chat_completions])
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


def closed_port_url() -> str:
    """The base URL of a loopback port nothing listens on: connecting is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
