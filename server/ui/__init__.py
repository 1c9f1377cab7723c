"""The reviewer web UI under /qa: server-rendered pages for the review workflow and the pool,
signed in with a reviewer key.

A new page is a handler listed in `router` and a template that extends base.html, whose nav bar
lists the pages.
"""

from __future__ import annotations

from litestar import Router
from litestar.datastructures import ResponseHeader
from litestar.di import Provide
from litestar.static_files import create_static_files_router

from server.errors import exception_handlers
from server.routes.options import with_options
from server.settings import Settings
from server.ui import (
    jobs_page,
    pool_page,
    review_pages,
    session,
    sign_in,
    spend_page,
    trace_page,
)
from server.ui.rendering import EXCEPTION_HANDLERS, STATIC, template_config

__all__ = ["router", "template_config"]

# Pages show what candidates must never see, and hold buttons that change the pool: never
# cached, never framed by another site, no resource but this server's own.
PAGE_HEADERS = [
    ResponseHeader(name="Cache-Control", value="no-store"),
    ResponseHeader(name="X-Frame-Options", value="DENY"),
    ResponseHeader(
        name="Content-Security-Policy", value="default-src 'self'; frame-ancestors 'none'"
    ),
    ResponseHeader(name="Referrer-Policy", value="same-origin"),
]


def router(settings: Settings) -> Router:
    return Router(
        path=session.HOME,
        route_handlers=[
            *with_options(
                [
                    sign_in.sign_in_page,
                    sign_in.sign_in,
                    sign_in.sign_out,
                    review_pages.queue_page,
                    review_pages.mission_page,
                    review_pages.approve,
                    review_pages.reject,
                    review_pages.retire,
                    review_pages.retire_variant,
                    pool_page.pool_page,
                    jobs_page.jobs_page,
                    spend_page.spend_page,
                    trace_page.trace_page,
                    trace_page.trace_text,
                ]
            ),
            # Static files carry no session, which error pages need: theirs are problem details.
            create_static_files_router(
                "/static",
                directories=[STATIC],
                opt={"skip_session": True},
                exception_handlers=exception_handlers(),
            ),
        ],
        middleware=[session.session_middleware(settings)],
        guards=[session.check_form_token],
        dependencies={"reviewer": Provide(session.signed_in_reviewer)},
        exception_handlers=EXCEPTION_HANDLERS,
        response_headers=PAGE_HEADERS,
        include_in_schema=False,
    )
