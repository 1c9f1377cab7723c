"""A deadline on every HTTP request, so that a database that stops answering (a network
partition, a frozen server) never leaves a caller hanging.

A request still unanswered at its deadline is answered 503 at once. Its work is cancelled but
not waited for: asyncpg may need a while to give up a connection to a silent server, and the
caller has waited long enough.
"""

from __future__ import annotations

import asyncio
import logging

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class RequestTimedOut(Exception):
    """The request passed its deadline; the error seam answers 503 with Retry-After."""


class RequestDeadline(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._abandoned: set[asyncio.Future[None]] = set()

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        answering = False

        async def send_noting_the_answer(message: Message) -> None:
            nonlocal answering
            answering = True
            await send(message)

        work = asyncio.ensure_future(next_app(scope, receive, send_noting_the_answer))
        await asyncio.wait({work}, timeout=self._seconds)
        if work.done() or answering:
            await work  # an answer under way is let finish
            return
        work.cancel()
        log.warning(
            "%s %s not answered within %gs: answered 503",
            scope.get("method"),
            scope["path"],
            self._seconds,
        )
        # Kept referenced until it ends, so its cleanup is not collected half-way.
        self._abandoned.add(work)
        work.add_done_callback(self._forget)
        raise RequestTimedOut(
            f"the request was not answered within {self._seconds:g}s: the database is slow or "
            "unreachable; retry shortly"
        )

    def _forget(self, work: asyncio.Future[None]) -> None:
        self._abandoned.discard(work)
        if not work.cancelled():
            work.exception()  # retrieved: nobody is left to report it to
