"""``GET /topics/{subject}/history``: pages of retained events, checked like the tail."""

from __future__ import annotations

import httpx
import pytest

from a2a_bus.bus import Bus
from a2a_bus.gateway import Access, GatewaySettings

pytestmark = pytest.mark.timeout(60)

ADMIN, LIMITED = "admin-token", "limited-token"


@pytest.fixture
def settings() -> GatewaySettings:
    return GatewaySettings(
        request_timeout=20,
        tokens={ADMIN: Access(name="admin"), LIMITED: Access(name="limited", topics=("news.*",))},
    )


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_pages_through_a_subject(client: httpx.AsyncClient, bus: Bus) -> None:
    publisher = bus.async_client()
    ids = [await publisher.publish("news.sport", {"n": n}) for n in range(5)]
    first = await client.get(
        "/topics/news.sport/history", params={"limit": 3}, headers=bearer(LIMITED)
    )
    assert first.status_code == 200
    body = first.json()
    assert [e["data"] for e in body["events"]] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [e["id"] for e in body["events"]] == ids[:3]
    assert body["events"][0]["subject"] == "news.sport" and body["undecodable"] == 0
    rest = await client.get(
        "/topics/news.sport/history", params={"cursor": body["cursor"]}, headers=bearer(LIMITED)
    )
    assert [e["id"] for e in rest.json()["events"]] == ids[3:]
    newest = await client.get(
        "/topics/news.sport/history",
        params={"newest": "true", "limit": "2"},
        headers=bearer(ADMIN),
    )
    assert [e["id"] for e in newest.json()["events"]] == ids[3:]
    unknown = await client.get("/topics/news.none/history", headers=bearer(ADMIN))
    assert unknown.status_code == 200 and unknown.json()["events"] == []


@pytest.mark.parametrize(
    ("path", "params", "reason"),
    [
        ("/topics/news.sport/history", {"limit": "0"}, "limit must be an integer from 1 to 1000"),
        ("/topics/news.sport/history", {"limit": "1001"}, "limit must be an integer"),
        ("/topics/news.sport/history", {"limit": "-3"}, "limit must be an integer"),
        ("/topics/news.sport/history", {"limit": "ten"}, "limit must be an integer"),
        ("/topics/news.sport/history", {"newest": "maybe"}, "newest must be true or false"),
        ("/topics/news.sport/history", {"cursor": "%%%"}, "not a cursor returned"),
        ("/topics/news.*/history", {}, "wildcards select subjects to subscribe to"),
        ("/topics/bad subject/history", {}, "invalid subject"),
        ("/topics//history", {}, "invalid subject ''"),  # not a bare 404
        ("/topics/news/sport/history", {}, "invalid subject 'news/sport'"),
        ("/topics/news/sport/events", {}, "invalid subject 'news/sport'"),
    ],
)
async def test_bad_requests_get_400(
    client: httpx.AsyncClient, path: str, params: dict[str, str], reason: str
) -> None:
    response = await client.get(path, params=params, headers=bearer(ADMIN))
    assert response.status_code == 400
    assert reason in response.json()["error"]


async def test_a_cursor_of_another_subject_gets_400(client: httpx.AsyncClient) -> None:
    other = await client.get("/topics/news.other/history", headers=bearer(ADMIN))
    response = await client.get(
        "/topics/news.sport/history",
        params={"cursor": other.json()["cursor"]},
        headers=bearer(ADMIN),
    )
    assert response.status_code == 400
    assert "another topic" in response.json()["error"]


async def test_subjects_outside_the_allow_list_get_403_and_no_token_401(
    client: httpx.AsyncClient,
) -> None:
    denied = await client.get("/topics/billing.invoices/history", headers=bearer(LIMITED))
    assert denied.status_code == 403
    assert "not allowed for this token" in denied.json()["error"]
    anonymous = await client.get("/topics/news.sport/history")
    assert anonymous.status_code == 401
