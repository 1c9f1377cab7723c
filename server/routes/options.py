"""OPTIONS answers whose `Allow` names every method of the path.

Litestar 2 makes a path's OPTIONS handler when it registers the path's first handler, and that
handler goes on answering with the methods known then: `GET, OPTIONS` for a path whose DELETE
came next (litestar issue 4169). An OPTIONS handler of our own, registered before the others,
keeps litestar from making one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from litestar import Response, route
from litestar.handlers import HTTPRouteHandler
from litestar.types import ControllerRouterHandler


def with_options(handlers: Sequence[ControllerRouterHandler]) -> list[ControllerRouterHandler]:
    """The handlers, after one OPTIONS handler per path of theirs that names all its methods."""
    methods: dict[str, set[str]] = defaultdict(lambda: {"OPTIONS"})
    for handler in handlers:
        if isinstance(handler, HTTPRouteHandler):
            for path in handler.paths:
                methods[path] |= handler.http_methods
    return [*(_options(path, allowed) for path, allowed in methods.items()), *handlers]


def _options(path: str, methods: set[str]) -> HTTPRouteHandler:
    allow = ", ".join(sorted(methods))

    def answer() -> Response[None]:
        return Response(None, status_code=204, headers={"Allow": allow})

    return route(path, http_method="OPTIONS", include_in_schema=False, sync_to_thread=False)(answer)
