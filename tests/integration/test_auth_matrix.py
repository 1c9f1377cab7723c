"""Every route against every kind of caller: no key, a wrong key, and each role's key.

The routes come from the app and the role each needs from its guard, so a new route is in the
matrix as soon as it exists; one without a role guard must be listed below as public.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from litestar import Litestar
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from server.auth import ROLES, Role, RoleGuard
from tests.support.http import assert_problem, bearer

Client = AsyncTestClient[Litestar]

# Routes that take no API key, and why. The key a caller sends makes no difference to them.
PUBLIC_PATHS = {
    "/healthz": "the liveness probe",
    "/readyz": "the readiness probe",
    "/metrics": "Prometheus scrapes without a key",
}
PUBLIC_PREFIXES = {
    "/schema": "the published contract",
    "/qa": "the reviewer UI: a cookie session, signed into with a key on its own page",
}
# OPTIONS on any path is the framework's answer naming the allowed methods.
PUBLIC_METHODS = {"OPTIONS"}


@dataclass(frozen=True)
class Endpoint:
    method: str
    template: str  # the route's path, with its parameters
    role: Role | None  # None: public

    @property
    def path(self) -> str:
        """The path with an id in place of each parameter."""
        return re.sub(r"\{[^}]+\}", "1", self.template)

    def __str__(self) -> str:
        return f"{self.method} {self.template}"


def endpoints(app: Litestar) -> list[Endpoint]:
    found = []
    for route in app.routes:
        assert isinstance(route, HTTPRoute), f"{route.path}: only HTTP routes are expected"
        for handler in route.route_handlers:
            roles = {
                guard.role for guard in handler.resolve_guards() if isinstance(guard, RoleGuard)
            }
            assert len(roles) <= 1, f"{route.path}: more than one role guard"
            found += [
                Endpoint(method, route.path, next(iter(roles), None))
                for method in handler.http_methods
            ]
    return sorted(found, key=str)


def listed_as_public(endpoint: Endpoint) -> bool:
    return (
        endpoint.method in PUBLIC_METHODS
        or endpoint.template in PUBLIC_PATHS
        or any(
            endpoint.template == prefix or endpoint.template.startswith(f"{prefix}/")
            for prefix in PUBLIC_PREFIXES
        )
    )


def callers(keys: dict[Role, str]) -> dict[str, dict[str, str]]:
    """Each kind of caller, and the headers it sends."""
    return {"no key": {}, "a wrong key": bearer("wp_" + "x" * 43)} | {
        role: bearer(key) for role, key in keys.items()
    }


async def test_every_route_needs_a_role_or_is_listed_as_public(client: Client) -> None:
    found = endpoints(client.app)
    assert {endpoint.role for endpoint in found} == {None, *ROLES}, "each role guards a route"
    unguarded = [
        str(endpoint)
        for endpoint in found
        if endpoint.role is None and not listed_as_public(endpoint)
    ]
    assert unguarded == [], "a route without a role guard is public: list it, or guard it"
    guarded_public = [str(e) for e in found if e.role is not None and listed_as_public(e)]
    assert guarded_public == []


async def test_the_operators_routes_are_in_the_matrix_for_admin_only(client: Client) -> None:
    operators = {"GET /v1/queue", "GET /v1/pool", "POST /v1/pool/replenish", "GET /v1/workers"}
    found = {str(endpoint): endpoint.role for endpoint in endpoints(client.app)}
    assert {route: found.get(route) for route in operators} == dict.fromkeys(operators, "admin")


async def test_each_caller_gets_401_403_or_through_as_its_role_allows(
    client: Client, keys: dict[Role, str]
) -> None:
    wrong = []
    for endpoint in endpoints(client.app):
        answers = {
            caller: await client.request(
                endpoint.method, endpoint.path, headers=headers, follow_redirects=False
            )
            for caller, headers in callers(keys).items()
        }
        statuses = {caller: answer.status_code for caller, answer in answers.items()}
        if any(status >= 500 for status in statuses.values()):
            wrong.append(f"{endpoint}: a server error {statuses}")
        elif endpoint.role is None:
            if len(set(statuses.values())) != 1 or 401 in statuses.values():
                wrong.append(f"{endpoint} is public, yet the key changes its answer: {statuses}")
        else:
            for caller in ("no key", "a wrong key"):
                assert_problem(answers[caller], 401)
                assert answers[caller].headers["www-authenticate"] == "Bearer"
            for role in ROLES:
                if role in (endpoint.role, "admin"):
                    if statuses[role] in (401, 403):
                        wrong.append(f"{endpoint}: {role} may call it, yet got {statuses[role]}")
                else:
                    assert_problem(answers[role], 403, repr(endpoint.role), repr(role))
    assert wrong == []


async def test_the_document_says_which_operations_need_a_key(client: Client) -> None:
    by_path = {(e.method, e.path): e for e in endpoints(client.app)}
    document = (await client.get("/schema/openapi.json")).json()
    assert document["security"] == [{"bearer": []}], "a key by default"
    for path, item in document["paths"].items():
        for method, operation in item.items():
            endpoint = by_path[method.upper(), re.sub(r"\{[^}]+\}", "1", path)]
            declared = {"401", "403"} & set(operation["responses"])
            if endpoint.role is None:
                assert (operation.get("security"), declared) == ([{}], set()), endpoint
            else:
                assert ("security" not in operation, declared) == (True, {"401", "403"}), endpoint
