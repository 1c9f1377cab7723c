"""The trace page: paste a leaked text, see the instances it came from, best first, with the
forms that retire the leaked variant or the whole mission."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import URLEncodedBody
from litestar.response import Template

from qa import trace
from server.auth import Caller
from server.services import Services
from server.ui.rendering import page


class TraceForm(msgspec.Struct):
    text: str = ""


@get("/trace")
async def trace_page(
    request: Request[Any, Any, Any], reviewer: NamedDependency[Caller]
) -> Template:
    return page(request, "trace.html", reviewer=reviewer, text="", matches=None, problem=None)


@post("/trace")
async def trace_text(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    reviewer: NamedDependency[Caller],
    data: URLEncodedBody[TraceForm],
) -> Template:
    try:
        matches = await trace.trace(services.db, data.text)
    except trace.InvalidTrace as error:
        return page(
            request, "trace.html", reviewer=reviewer, text=data.text, matches=None, problem=error
        )
    return page(
        request, "trace.html", reviewer=reviewer, text=data.text, matches=matches, problem=None
    )
