"""The published OpenAPI document against what the server does: every error answer it declares
is problem details, a request declares what the server checks, OPTIONS names the methods it
declares, and what it does not declare (another method, another path) is a 405 or a 404 problem.
The fuzz tier (tests/fuzz) sends what it declares."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

from core import domains
from server.auth import Role
from server.errors import PROBLEM_JSON
from tests.support.http import assert_problem, bearer
from tests.support.server import ROOT

Client = AsyncTestClient[Litestar]
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
DOMAIN_MAP = domains.load(ROOT / "domain_map.yaml")


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


def text_fields(schema: dict[str, Any], components: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The string schemas in a request schema, through references and null arms."""
    if "$ref" in schema:
        yield from text_fields(components[schema["$ref"].rsplit("/", 1)[1]], components)
    for arm in schema.get("oneOf", []):
        yield from text_fields(arm, components)
    for field in schema.get("properties", {}).values():
        yield from text_fields(field, components)
    if schema.get("type") == "string":
        yield schema


async def test_a_request_declares_what_the_server_checks(client: Client) -> None:
    """Text the server stores is bounded (or one of some names), bodies take no other field, and
    a header a route needs is required: a client that follows the document is never refused."""
    document = (await client.get("/schema/openapi.json")).json()
    components = document["components"]["schemas"]
    bodies, texts = [], []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path":  # a path names a row: anything else is a 404
                    texts += [
                        (method, path, t) for t in text_fields(parameter["schema"], components)
                    ]
            for media in operation.get("requestBody", {}).get("content", {}).values():
                bodies.append(components[media["schema"]["$ref"].rsplit("/", 1)[1]])
                texts += [(method, path, t) for t in text_fields(media["schema"], components)]
    assert bodies
    assert texts
    assert [body["title"] for body in bodies if body.get("additionalProperties") is not False] == []
    assert [text for text in texts if "maxLength" not in text[2] and "enum" not in text[2]] == []
    assert components["UserTrack"]["properties"]["track"]["enum"] == sorted(DOMAIN_MAP.tracks)
    required = {
        path: {p["name"]: p["required"] for p in item["post"].get("parameters", [])}
        for path, item in document["paths"].items()
        if "post" in item
    }
    assert required["/v1/jobs"]["Idempotency-Key"] is True
    assert required["/v1/serve"]["Idempotency-Key"] is False


async def test_every_operation_that_needs_a_key_declares_503(client: Client) -> None:
    """Checking the key needs the database: without it, the answer is 503, never 500."""
    without = [
        f"{method} {path}"
        for path, item in (await operations(client)).items()
        for method, operation in item.items()
        if "security" not in operation and "503" not in operation["responses"]
    ]
    assert without == []
