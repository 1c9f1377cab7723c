"""What a first run on the embedded defaults must reach: every domain of the map made by a live
worker, a mission of each in review, one approved by a reviewer over HTTP, and every track then
served from stock."""

from __future__ import annotations

from typing import Any

import httpx

from core.domains import DomainMap
from server.auth import Role
from tests.support.http import bearer
from tests.support.polling import until


def pool(client: httpx.Client, key: str) -> dict[str, dict[str, Any]]:
    answer = client.get("/v1/pool", headers=bearer(key))
    assert answer.status_code == 200, answer.text
    return {row["domain"]: row for row in answer.json()["domains"]}


def serves_every_domain(client: httpx.Client, keys: dict[Role, str], shipped: DomainMap) -> None:
    rows = pool(client, keys["admin"])
    assert set(rows) == set(shipped.domains)
    for row in rows.values():
        assert (row["enabled"], row["disabled_reasons"]) == (True, []), row

    until(
        lambda: all(row["awaiting_review"] for row in pool(client, keys["admin"]).values()),
        120,
        "a mission in review in every domain",
        every=0.5,
    )
    reviewer = bearer(keys["qa_reviewer"])
    for name in shipped.domains:
        waiting = client.get(
            "/v1/qa/missions",
            params={"status": "awaiting_review", "domain": name},
            headers=reviewer,
        ).json()["missions"]
        approved = client.post(
            f"/v1/qa/missions/{waiting[0]['id']}/approve", json={}, headers=reviewer
        )
        assert approved.status_code == 200, approved.text

    assert all(row["approved"] for row in pool(client, keys["admin"]).values())
    for track in shipped.tracks:
        served = client.post(
            "/v1/serve",
            json={"user_id": f"first-run-{track}", "track": track},
            headers=bearer(keys["candidate_app"]),
        )
        assert served.status_code == 200, f"{track}: {served.text}"
