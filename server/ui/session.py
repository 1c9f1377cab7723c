"""The reviewer UI's session: an encrypted and signed HttpOnly cookie that carries the token of
a session row, a per-session token that every form posts back, and the way to the sign-in page.

The cookie holds the session's token, never the key; every page checks the row, so signing out,
the session's lifetime running out, or a revoked or deleted key ends it at once, for every copy
of the cookie too.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware.session.base import SessionMiddleware
from litestar.middleware.session.client_side import ClientSideSessionBackend, CookieBackendConfig
from litestar.types import ASGIApp

from server import reviewer_sessions
from server.auth import Caller, Role
from server.services import Services
from server.settings import Settings

HOME = "/qa"
COOKIE = "warmpool_qa"
SESSION = "session"
SECRET_FILE = "secret_key"
FORM_TOKEN = "csrf_token"
REVIEWER_ROLES: tuple[Role, ...] = ("qa_reviewer", "admin")


class SignInRequired(Exception):
    """No session, or one that has ended (signed out, expired, its key revoked): sign in."""

    def __init__(self, next_path: str, *, ended: bool = False) -> None:
        self.next_path = next_path
        self.ended = ended
        super().__init__("sign in with a reviewer key")


class FormExpired(Exception):
    """A POST whose form token is not this session's: a stale page, or another site's form;
    `hint` says what else may be the cause."""

    def __init__(self, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__("the form has expired or did not come from this site")


def session_middleware(settings: Settings) -> Callable[[ASGIApp], ASGIApp]:
    # A factory, not litestar's DefineMiddleware: registering a router deep-copies it, and the
    # cookie's cipher cannot be copied.
    backend = ClientSideSessionBackend(cookie_config(settings))

    def middleware(app: ASGIApp) -> ASGIApp:
        return SessionMiddleware(app, backend)

    return middleware


def cookie_config(settings: Settings) -> CookieBackendConfig:
    return CookieBackendConfig(
        secret=_cookie_secret(settings),
        key=COOKIE,
        path=HOME,
        # The session row decides when the session ends; the cookie need not outlive it.
        max_age=math.ceil(settings.session_lifetime_seconds),
        secure=settings.secure_cookies,
        httponly=True,
        samesite="lax",
        # Static files carry no session; skipping it keeps their answers free of cookies.
        exclude_opt_key="skip_session",
    )


def _cookie_secret(settings: Settings) -> bytes:
    # AES-GCM wants exactly 32 bytes; any configured text of enough entropy maps onto them.
    text = settings.secret_key or kept_secret(settings.data_dir / SECRET_FILE)
    return hashlib.sha256(text.encode()).digest()


def kept_secret(path: Path) -> str:
    """The random secret kept at `path` (mode 0600), made on the first start: sessions survive
    restarts, and processes starting together on one machine agree on one secret."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(48))
        try:
            os.link(draft, path)  # atomic, and never replaces: the first starter's secret wins
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text(encoding="utf-8").strip()


def form_token(request: Request[Any, Any, Any]) -> str:
    """This session's form token, made on its first page."""
    token = request.session.get(FORM_TOKEN)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        request.session[FORM_TOKEN] = token
    return token


async def sign_in(request: Request[Any, Any, Any], services: Services, caller: Caller) -> None:
    # A fresh session: nothing from before signing in carries over, the form token included,
    # and a session this browser had is ended rather than left to run.
    await sign_out(request, services)
    token = await reviewer_sessions.start(
        services.db,
        caller.key_id,
        lifetime=timedelta(seconds=services.settings.session_lifetime_seconds),
    )
    request.set_session({SESSION: token, FORM_TOKEN: secrets.token_urlsafe(32)})


async def sign_out(request: Request[Any, Any, Any], services: Services) -> None:
    token = request.session.get(SESSION)
    if isinstance(token, str):
        await reviewer_sessions.end(services.db, token)
    request.clear_session()


async def check_form_token(
    connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler
) -> None:
    """A guard on every route of the UI: each POST must carry this session's form token."""
    if connection.scope.get("method") != "POST":
        return
    assert isinstance(connection, Request)
    posted = (await connection.form()).get(FORM_TOKEN)
    expected = connection.session.get(FORM_TOKEN)
    if not (
        isinstance(posted, str)
        and isinstance(expected, str)
        and hmac.compare_digest(posted.encode(), expected.encode())
    ):
        raise FormExpired(_why_no_cookie(connection) if expected is None else None)


def _why_no_cookie(request: Request[Any, Any, Any]) -> str | None:
    """Why a form came without a session cookie, when the likely cause is plain http."""
    settings: Settings = request.app.state.services.settings
    if settings.secure_cookies and request.url.scheme == "http":
        return (
            "this page came over plain http, but the session cookie is Secure, and browsers "
            "send it over https only. Open the reviewer UI over https or, where only this "
            "machine's browser reaches warmpool, start it with WARMPOOL_SECURE_COOKIES=false"
        )
    return None


async def signed_in_reviewer(
    request: Request[Any, Any, Any], services: NamedDependency[Services]
) -> Caller:
    """The `reviewer` of a page: the session's key, while the session lives and the key may
    review."""
    token = request.session.get(SESSION)
    caller = (
        await reviewer_sessions.signed_in_key(services.db, token)
        if isinstance(token, str)
        else None
    )
    if caller is None or caller.role not in REVIEWER_ROLES:
        # Dropped from the cookie, so that the sign-in page says once that it has ended.
        ended = request.session.pop(SESSION, None) is not None
        raise SignInRequired(request.url.path if request.method == "GET" else HOME, ended=ended)
    return caller


def safe_next(path: str | None) -> str:
    """Where to go after signing in: a page of this UI, never another site."""
    return path if path and path.startswith(HOME) else HOME
