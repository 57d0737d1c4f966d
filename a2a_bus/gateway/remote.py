"""A small async HTTP client of a running gateway (used by the ``a2a-bus`` commands)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from a2a_bus.protocol import new_id


class GatewayError(Exception):
    """The gateway answered with an HTTP error; the message is the gateway's reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def error_reason(status: int, body: Any) -> str:
    """The reason in an error body: ``{"error": "..."}``, a JSON-RPC error object
    (message and data), else the body itself."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str) and error:
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        data = error.get("data")
        return f"{error['message']}: {data}" if isinstance(data, str) and data else error["message"]
    text = body if isinstance(body, str) else orjson.dumps(body).decode()
    return f"HTTP {status}: {text}" if text.strip() else f"HTTP {status}"


class GatewayClient:
    """``async with GatewayClient("http://127.0.0.1:8080", token=...) as gw: ...``"""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout)

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    def _check(self, response: httpx.Response) -> None:
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = response.text
            raise GatewayError(response.status_code, error_reason(response.status_code, body))

    async def rpc(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """POST one JSON-RPC message; the response, or None for a notification."""
        response = await self._http.post("/rpc", content=orjson.dumps(message))
        if response.status_code == 204:
            return None
        self._check(response)
        answer: dict[str, Any] = response.json()
        return answer

    async def publish(self, subject: str, data: Any, type: str) -> str:
        """Publish a structured CloudEvent on ``subject``; its id."""
        event = {
            "specversion": "1.0",
            "id": new_id(),
            "source": "a2a-bus-cli",
            "type": type,
            "subject": subject,
            "datacontenttype": "application/json",
            "data": data,
        }
        headers = {"content-type": "application/cloudevents+json"}
        response = await self._http.post("/events", content=orjson.dumps(event), headers=headers)
        self._check(response)
        return str(event["id"])

    async def agents(self) -> list[dict[str, Any]]:
        response = await self._http.get("/agents")
        self._check(response)
        cards: list[dict[str, Any]] = response.json()["agents"]
        return cards

    async def history(
        self, subject: str, *, limit: int, cursor: str | None = None, newest: bool = False
    ) -> dict[str, Any]:
        """A page of the events ``subject`` retains: ``{"events", "cursor", "undecodable"}``."""
        params: dict[str, Any] = {"limit": limit, "newest": "true" if newest else "false"}
        if cursor is not None:
            params["cursor"] = cursor
        url = f"/topics/{quote(subject, safe='')}/history"
        response = await self._http.get(url, params=params)
        self._check(response)
        page: dict[str, Any] = response.json()
        return page

    async def tail(self, subject: str) -> AsyncIterator[dict[str, Any]]:
        """Structured CloudEvents published on ``subject`` from now on."""
        url = f"/topics/{quote(subject, safe='')}/events"  # '#' would start a fragment
        async with self._http.stream("GET", url, timeout=httpx.Timeout(None)) as response:
            if response.status_code >= 400:
                await response.aread()
                self._check(response)
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    yield orjson.loads(line[len("data: ") :])
