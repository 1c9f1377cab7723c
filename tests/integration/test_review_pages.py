"""The reviewer UI over HTTP: signing in, the session cookie, the form token on every POST, and
a decision made through a form; the session ends at sign-out, with its key and at the end of its
lifetime, for every copy of its cookie."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.middleware.session.client_side import ClientSideSessionBackend
from litestar.testing import AsyncTestClient

from core import domains
from server import reviewer_sessions
from server.app import create_app
from server.auth import Role
from server.settings import Settings
from server.ui import session
from tests.support.http import assert_problem, form_token, sign_in
from tests.support.proven_missions import store_mission
from tests.support.server import ROOT, key_id

Client = AsyncTestClient[Litestar]
PYTHON = domains.load(ROOT / "domain_map.yaml").domains["python-backend"]


def cookie_attributes(response: Any) -> set[str]:
    cookie: str = response.headers["set-cookie"]
    return {attribute.strip().lower() for attribute in cookie.split(";")[1:]}


def carry_cookie(client: Client, value: str) -> None:
    """The browser now holds this session cookie, and no other."""
    client.cookies.clear()
    client.cookies.set(session.COOKIE, value, domain=client.base_url.host, path=session.HOME)


def cookie_naming(settings: Settings, token: str) -> str:
    """A session cookie, as the app writes it, naming the session `token`."""
    backend = ClientSideSessionBackend(session.cookie_config(settings))
    return backend.dump_data({session.SESSION: token})[0].decode()


async def sent_to_sign_in_again(client: Client) -> bool:
    response = await client.get("/qa", follow_redirects=False)
    if response.status_code != 303:
        return False
    assert response.headers["location"] == "/qa/sign-in?next=%2Fqa"
    shown = await client.get(response.headers["location"])
    assert "Your session has ended: sign in again." in shown.text
    return True


async def status_of(pool: asyncpg.Pool, mission_id: int) -> tuple[str, str | None]:
    row = await pool.fetchrow(
        "SELECT qa_status, reviewed_by FROM missions WHERE id = $1", mission_id
    )
    assert row is not None
    return row["qa_status"], row["reviewed_by"]


@pytest.mark.parametrize("path", ["/qa", "/qa/missions/1"])
async def test_a_browser_without_a_session_is_sent_to_sign_in(client: Client, path: str) -> None:
    response = await client.get(path, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == f"/qa/sign-in?next={path.replace('/', '%2F')}"


async def test_signing_in_sets_an_http_only_same_site_cookie_without_the_key(
    client: Client, keys: dict[Role, str]
) -> None:
    response = await sign_in(client, keys["qa_reviewer"])
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/qa"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("warmpool_qa=")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Path=/qa" in cookie
    assert keys["qa_reviewer"] not in cookie
    queue = await client.get("/qa")
    assert queue.status_code == 200
    assert "Signed in as <strong>test-qa_reviewer</strong>" in queue.text
    assert queue.headers["cache-control"] == "no-store"
    assert queue.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in queue.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("role", "message"),
    [(None, "This key is not known"), ("candidate_app", "has the role candidate_app")],
)
async def test_only_a_reviewer_or_admin_key_signs_in(
    client: Client, keys: dict[Role, str], role: Role | None, message: str
) -> None:
    response = await sign_in(client, keys[role] if role else "wp_not-a-key")
    assert response.status_code == 403
    assert message in response.text
    assert "text/html" in response.headers["content-type"]
    assert (await client.get("/qa", follow_redirects=False)).status_code == 303


async def test_a_tampered_cookie_is_no_session(client: Client, keys: dict[Role, str]) -> None:
    await sign_in(client, keys["qa_reviewer"])
    value = client.cookies["warmpool_qa"]
    client.cookies.set("warmpool_qa", value[:-8] + "AAAAAAAA", path="/qa")
    assert (await client.get("/qa", follow_redirects=False)).status_code == 303


async def test_approve_through_the_form_and_see_the_mission_leave_the_queue(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    mission_id = await store_mission(pool, PYTHON, title="The discount that adds up")
    await sign_in(client, keys["qa_reviewer"])
    queue = await client.get("/qa")
    assert "The discount that adds up" in queue.text
    page = await client.get(f"/qa/missions/{mission_id}")
    assert page.status_code == 200
    assert "<del>    return round(subtotal * (1 - discount), 2)</del>" in page.text
    assert "<ins>    return round(subtotal * (1 + discount), 2)</ins>" in page.text

    approved = await client.post(
        f"/qa/missions/{mission_id}/approve",
        data={"note": "clear and fair", "csrf_token": form_token(page)},
        follow_redirects=False,
    )
    assert approved.status_code == 303
    assert approved.headers["location"] == "/qa"
    assert await status_of(pool, mission_id) == ("approved", "test-qa_reviewer")
    queue = await client.get("/qa")
    assert "The discount that adds up” approved." in queue.text
    assert f'href="/qa/missions/{mission_id}"' not in queue.text

    again = await client.post(
        f"/qa/missions/{mission_id}/reject",
        data={"reason": "changed my mind", "csrf_token": form_token(page)},
        follow_redirects=False,
    )
    assert again.headers["location"] == f"/qa/missions/{mission_id}"
    shown = await client.get(again.headers["location"])
    assert "Nothing was changed: mission" in shown.text
    assert await status_of(pool, mission_id) == ("approved", "test-qa_reviewer")


async def test_every_post_needs_the_session_form_token(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    mission_id = await store_mission(pool, PYTHON)
    await sign_in(client, keys["qa_reviewer"])
    for token in (None, "forged"):
        data = {"reason": "not mine"} | ({"csrf_token": token} if token else {})
        response = await client.post(f"/qa/missions/{mission_id}/reject", data=data)
        assert response.status_code == 403
        assert "This form has expired" in response.text
    assert await status_of(pool, mission_id) == ("awaiting_review", None)
    signed_out = await client.post("/qa/sign-out", data={}, follow_redirects=False)
    assert signed_out.status_code == 403, "signing out takes the token too"


async def test_a_rejection_needs_a_reason_and_sign_out_ends_the_session(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    mission_id = await store_mission(pool, PYTHON)
    await sign_in(client, keys["admin"])
    page = await client.get(f"/qa/missions/{mission_id}")
    token = form_token(page)
    refused = await client.post(
        f"/qa/missions/{mission_id}/reject", data={"reason": " ", "csrf_token": token}
    )
    assert "reason is empty" in refused.text
    assert await status_of(pool, mission_id) == ("awaiting_review", None)

    out = await client.post("/qa/sign-out", data={"csrf_token": token}, follow_redirects=False)
    assert out.headers["location"] == "/qa/sign-in"
    assert (await client.get("/qa", follow_redirects=False)).status_code == 303


async def test_an_unknown_mission_is_a_404_page(client: Client, keys: dict[Role, str]) -> None:
    await sign_in(client, keys["qa_reviewer"])
    for mission_id in ("999999", "abc"):
        response = await client.get(f"/qa/missions/{mission_id}")
        assert response.status_code == 404
        assert "text/html" in response.headers["content-type"]
        assert "there is no mission" in response.text


async def test_the_stylesheet_is_served_without_a_session(client: Client) -> None:
    response = await client.get("/qa/static/qa.css")
    assert response.status_code == 200
    assert "set-cookie" not in response.headers
    missing = await client.get("/qa/static/missing.css")
    assert_problem(missing, 404, "missing.css")


@pytest.mark.parametrize(
    ("secure_cookies", "base_url"),
    [(None, "https://qa.example.com"), (False, "http://127.0.0.1:8000")],
    ids=["by-default", "allowed-plain-http"],
)
async def test_the_session_cookie_is_secure_unless_plain_http_is_allowed(
    settings: Settings, keys: dict[Role, str], secure_cookies: bool | None, base_url: str
) -> None:
    if secure_cookies is not None:
        settings = msgspec.structs.replace(settings, secure_cookies=secure_cookies)
    async with AsyncTestClient(create_app(settings), base_url=base_url) as client:
        signed_in = await sign_in(client, keys["qa_reviewer"])
        assert signed_in.status_code == 303, signed_in.text
        attributes = cookie_attributes(signed_in)
        assert ("secure" in attributes) is (secure_cookies is None)
        assert {"httponly", "samesite=lax", "path=/qa"} <= attributes
        assert (await client.get("/qa")).status_code == 200


async def test_over_plain_http_a_secure_cookie_never_comes_back_and_the_page_says_why(
    settings: Settings, keys: dict[Role, str]
) -> None:
    async with AsyncTestClient(create_app(settings), base_url="http://127.0.0.1:8000") as client:
        refused = await sign_in(client, keys["qa_reviewer"])
        assert refused.status_code == 403
        assert "this page came over plain http" in refused.text
        assert "WARMPOOL_SECURE_COOKIES=false" in refused.text


async def test_a_copied_cookie_stops_working_at_sign_out(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    page = await client.get("/qa")
    copied = client.cookies[session.COOKIE]
    carry_cookie(client, copied)
    assert (await client.get("/qa")).status_code == 200, "the copy works while signed in"

    out = await client.post(
        "/qa/sign-out", data={"csrf_token": form_token(page)}, follow_redirects=False
    )
    assert out.headers["location"] == "/qa/sign-in"
    assert (await client.get("/qa", follow_redirects=False)).status_code == 303
    carry_cookie(client, copied)
    assert await sent_to_sign_in_again(client)
    ended = await pool.fetchval("SELECT ended_at FROM reviewer_sessions")
    assert ended is not None


async def test_signing_in_again_ends_the_session_the_browser_had(
    client: Client, keys: dict[Role, str]
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    before = client.cookies[session.COOKIE]
    await sign_in(client, keys["admin"])
    assert "(admin)" in (await client.get("/qa")).text
    carry_cookie(client, before)
    assert await sent_to_sign_in_again(client)


@pytest.mark.parametrize(
    "end_the_key",
    [
        "UPDATE api_keys SET revoked_at = now() WHERE name = 'test-qa_reviewer'",
        "DELETE FROM api_keys WHERE name = 'test-qa_reviewer'",
    ],
)
async def test_a_revoked_or_deleted_key_ends_its_browser_sessions_at_once(
    client: Client, keys: dict[Role, str], pool: asyncpg.Pool, end_the_key: str
) -> None:
    await sign_in(client, keys["qa_reviewer"])
    assert (await client.get("/qa")).status_code == 200
    await pool.execute(end_the_key)
    assert await sent_to_sign_in_again(client)


async def test_a_session_lasts_the_configured_lifetime_from_sign_in(
    settings: Settings, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    ten_minutes = msgspec.structs.replace(settings, session_lifetime_seconds=600.0)
    async with AsyncTestClient(
        create_app(ten_minutes), base_url="https://qa.example.com"
    ) as client:
        signed_in = await sign_in(client, keys["qa_reviewer"])
        assert "max-age=600" in cookie_attributes(signed_in)
        lifetime = await pool.fetchval("SELECT expires_at - created_at FROM reviewer_sessions")
        assert lifetime == timedelta(minutes=10)


async def test_a_session_ends_its_lifetime_after_sign_in_however_busy(
    client: Client, settings: Settings, keys: dict[Role, str], pool: asyncpg.Pool
) -> None:
    lifetime = timedelta(seconds=settings.session_lifetime_seconds)
    reviewer = await key_id(pool, "qa_reviewer")
    now = datetime.now(UTC)
    # Signed in a minute less than a lifetime ago: pages open, and none moves the end.
    almost = now - lifetime + timedelta(minutes=1)
    busy = await reviewer_sessions.start(pool, reviewer, lifetime=lifetime, now=almost)
    carry_cookie(client, cookie_naming(settings, busy))
    for path in ("/qa", "/qa/pool", "/qa"):
        assert (await client.get(path)).status_code == 200
    assert await pool.fetchval("SELECT expires_at FROM reviewer_sessions") == almost + lifetime

    # Signed in a lifetime and a second ago: sent to sign in again.
    over = await reviewer_sessions.start(
        pool, reviewer, lifetime=lifetime, now=now - lifetime - timedelta(seconds=1)
    )
    carry_cookie(client, cookie_naming(settings, over))
    assert await sent_to_sign_in_again(client)
