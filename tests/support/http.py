"""Talking to the app in tests: the key header, the problem-details answer, the reviewer UI's
sign-in and form token."""

from __future__ import annotations

import re
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]


def assert_problem(response: Any, status: int, *detail_words: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["title"]
    for word in detail_words:
        assert word in body["detail"], body["detail"]
    return body


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def form_token(page: Any) -> str:
    match = TOKEN.search(page.text)
    assert match, "the page has a form with the session's token"
    return match[1]


async def sign_in(client: Client, key: str) -> Any:
    page = await client.get("/qa/sign-in")
    return await client.post(
        "/qa/sign-in",
        data={"key": key, "next": "/qa", "csrf_token": form_token(page)},
        follow_redirects=False,
    )
