"""``GET /agents/{id}``: a card, 404 for an unknown agent, 400 for an id that cannot be one."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.timeout(60)


async def test_a_live_agent_has_a_card_and_an_unknown_one_gets_404(
    client: httpx.AsyncClient,
) -> None:
    card = await client.get("/agents/echo")
    assert card.status_code == 200
    assert card.json()["id"] == "echo"
    unknown = await client.get("/agents/nobody")
    assert unknown.status_code == 404
    assert "no live agent 'nobody'" in unknown.json()["error"]


@pytest.mark.parametrize("agent_id", ["bad%20id", "caf%C3%A9", "x%00", "a:b"])
async def test_an_invalid_agent_id_gets_400(client: httpx.AsyncClient, agent_id: str) -> None:
    response = await client.get(f"/agents/{agent_id}")
    assert response.status_code == 400, response.text
    assert "invalid agent id" in response.json()["error"]
