"""Rendering the UI: the Jinja templates, what every page is given (who is signed in, the form
token, a one-time notice), and errors shown as pages, never as problem JSON."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.template.config import TemplateConfig
from litestar.types import ExceptionHandlersMap

from server.auth import Caller
from server.errors import DOMAIN_ERRORS
from server.status import duration
from server.ui.session import FormExpired, SignInRequired, form_token

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["when"] = when
    environment.filters["to_the_second"] = to_the_second
    environment.filters["duration"] = duration
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))


def when(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment:%Y-%m-%d %H:%M} UTC"


def to_the_second(value: datetime) -> str:
    """As `when`, to the second, for a column whose heading names UTC."""
    return f"{value:%Y-%m-%d %H:%M:%S}"


def page(
    request: Request[Any, Any, Any],
    template: str,
    *,
    reviewer: Caller | None,
    status_code: int = 200,
    **context: Any,
) -> Template:
    return Template(
        template_name=template,
        context={
            "reviewer": reviewer,
            "form_token": form_token(request),
            "notice": request.session.pop("notice", None),
            **context,
        },
        status_code=status_code,
    )


def notify(request: Request[Any, Any, Any], text: str, *, error: bool = False) -> None:
    """A notice for the next page shown, once (the answer to a form, after its redirect)."""
    request.session["notice"] = {"text": text, "error": error}


def error_page(
    request: Request[Any, Any, Any], status_code: int, title: str, detail: str
) -> Template:
    return page(
        request,
        "error.html",
        reviewer=None,
        status_code=status_code,
        title=title,
        detail=detail,
    )


def _sign_in_first(request: Request[Any, Any, Any], error: SignInRequired) -> Response[Any]:
    if error.ended:
        notify(request, "Your session has ended: sign in again.")
    return Redirect("/qa/sign-in", query_params={"next": error.next_path}, status_code=303)


def _form_expired(request: Request[Any, Any, Any], error: FormExpired) -> Response[Any]:
    detail = (
        f"Your browser sent no session cookie with the form: {error.hint}."
        if error.hint
        else "The form was older than your session, or came from another site. "
        "Go back, reload the page and send it again."
    )
    return error_page(request, 403, "This form has expired", detail)


def _domain_error(request: Request[Any, Any, Any], error: Exception) -> Response[Any]:
    status, title, _ = next(
        DOMAIN_ERRORS[kind] for kind in type(error).__mro__ if kind in DOMAIN_ERRORS
    )
    return error_page(request, status, title, str(error))


def _http_error(request: Request[Any, Any, Any], error: HTTPException) -> Response[Any]:
    return error_page(request, error.status_code, "This request cannot be answered", error.detail)


# Every class the app's own table names is named here too: the most specific class wins
# whichever layer maps it.
EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    **dict.fromkeys(DOMAIN_ERRORS, _domain_error),
    SignInRequired: _sign_in_first,
    FormExpired: _form_expired,
    HTTPException: _http_error,
    ValidationException: _http_error,
}
