"""The published OpenAPI document against what the server does: every error answer it declares
is problem details, OPTIONS names the methods it declares, and what it does not declare (another
method, another path) is a 405 or a 404 problem."""

from __future__ import annotations

import re
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

from server.auth import Role
from server.errors import PROBLEM_JSON
from tests.support.http import assert_problem, bearer

Client = AsyncTestClient[Litestar]
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


async def operations(client: Client) -> dict[str, dict[str, Any]]:
    """Each path of the document, with an id in place of each of its parameters: its operations
    by method."""
    document = (await client.get("/schema/openapi.json")).json()
    return {
        re.sub(r"\{[^}]+\}", "1", path): {
            method.upper(): operation
            for method, operation in item.items()
            if method.upper() in METHODS
        }
        for path, item in document["paths"].items()
    }


async def test_every_declared_error_answer_is_problem_details(client: Client) -> None:
    declared = {
        f"{method} {path} {status}": sorted(answer.get("content", {}))
        for path, item in (await operations(client)).items()
        for method, operation in item.items()
        for status, answer in operation["responses"].items()
        if int(status) >= 400
    }
    assert declared
    assert {name: types for name, types in declared.items() if types != [PROBLEM_JSON]} == {}


async def test_a_method_a_path_does_not_declare_is_a_405_naming_those_it_does(
    client: Client, keys: dict[Role, str]
) -> None:
    for path, item in (await operations(client)).items():
        for method in set(METHODS) - set(item):
            answer = await client.request(method, path, headers=bearer(keys["admin"]))
            assert_problem(answer, 405, f"{method} is not allowed on {path}")
            allowed = {name.strip() for name in answer.headers["allow"].split(",")}
            assert set(item) <= allowed <= set(item) | {"HEAD", "OPTIONS"}, (method, path)


async def test_options_names_every_method_of_the_path(
    client: Client, keys: dict[Role, str]
) -> None:
    paths = {path: set(item) for path, item in (await operations(client)).items()}
    paths["/qa/sign-in"] = {"GET", "POST"}
    for path, methods in paths.items():
        answer = await client.options(path, headers=bearer(keys["admin"]))
        assert answer.status_code == 204, (path, answer.text)
        allowed = {name.strip() for name in answer.headers["allow"].split(",")}
        assert allowed == methods | {"OPTIONS"}, path


async def test_a_path_the_document_does_not_declare_is_a_404(
    client: Client, keys: dict[Role, str]
) -> None:
    for path in ("/v1", "/v1/jobs/1/cancel", "/v2/serve", "/v1/qa/missions/1/reopen", "/%00"):
        answer = await client.get(path, headers=bearer(keys["admin"]))
        assert_problem(answer, 404, "/schema/openapi.json")


async def test_every_operation_that_needs_a_key_declares_503(client: Client) -> None:
    """Checking the key needs the database: without it, the answer is 503, never 500."""
    without = [
        f"{method} {path}"
        for path, item in (await operations(client)).items()
        for method, operation in item.items()
        if "security" not in operation and "503" not in operation["responses"]
    ]
    assert without == []
