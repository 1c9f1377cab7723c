"""Signing in to the reviewer UI with a reviewer key, and signing out."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import QueryParameter, URLEncodedBody
from litestar.response import Redirect, Template

from server.services import Services
from server.ui import session
from server.ui.rendering import page


class SignInForm(msgspec.Struct):
    key: str = ""
    next: str = session.HOME


@get("/sign-in")
async def sign_in_page(
    request: Request[Any, Any, Any],
    next_page: Annotated[str, QueryParameter(name="next")] = session.HOME,
) -> Template:
    return _form(request, next_page)


@post("/sign-in")
async def sign_in(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    data: URLEncodedBody[SignInForm],
) -> Response[Any]:
    key = data.key.strip()
    caller = await services.keys.lookup(key) if key else None
    if caller is None:
        return _form(
            request,
            data.next,
            "This key is not known: check that you pasted all of it, or ask an operator "
            "for a reviewer key.",
        )
    if caller.role not in session.REVIEWER_ROLES:
        return _form(
            request,
            data.next,
            f"The key {caller.name!r} has the role {caller.role}; reviewing needs a key "
            "with the role qa_reviewer or admin.",
        )
    await session.sign_in(request, services, caller)
    return Redirect(session.safe_next(data.next), status_code=303)


@post("/sign-out")
async def sign_out(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Redirect:
    await session.sign_out(request, services)
    return Redirect("/qa/sign-in", status_code=303)


def _form(request: Request[Any, Any, Any], next_page: str, error: str | None = None) -> Template:
    return page(
        request,
        "sign_in.html",
        reviewer=None,
        status_code=200 if error is None else 403,
        next_page=session.safe_next(next_page),
        error=error,
    )
