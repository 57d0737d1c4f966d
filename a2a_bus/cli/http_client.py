"""A small async HTTP client of a running gateway (used by the ``a2a-bus`` commands)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from a2a_bus.protocol import new_id

#: Characters of an error body that is not the gateway's that an error message quotes.
MAX_REASON = 200


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
    text = " ".join(text.split())  # one line: an error page has many
    if len(text) > MAX_REASON:
        text = text[:MAX_REASON] + "..."
    return f"HTTP {status}: {text}" if text else f"HTTP {status}"


def check_token(token: str) -> str:
    """``token`` if it can be sent as a bearer token, else ValueError (which does not
    repeat it: it is a secret)."""
    # An HTTP header carries ASCII only; a space or a line break would end the token.
    if not (token.isascii() and token.isprintable()) or " " in token:
        raise ValueError("a bearer token must be printable ASCII without spaces")
    return token


def check_url(url: str) -> str:
    """``url`` if it can be a gateway's base URL (http or https, a host, a port from 1
    to 65535 if any), else ValueError saying what one looks like."""
    try:
        parsed = httpx.URL(url)
        usable = parsed.scheme in ("http", "https") and bool(parsed.host)
        usable = usable and (parsed.port is None or 0 < parsed.port < 65536)
    except (httpx.InvalidURL, ValueError):  # a bad port, an undecodable character
        usable = False
    if not usable:
        raise ValueError(f"{url!r}: use http://HOST[:PORT] or https://HOST[:PORT]")
    return url


class GatewayClient:
    """``async with GatewayClient("http://127.0.0.1:8080", token=...) as gw: ...``"""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0) -> None:
        headers = {"authorization": f"Bearer {check_token(token)}"} if token else {}
        self.url = url
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

    def _stranger(self, response: httpx.Response, expected: str) -> GatewayError:
        """The error for an answer no gateway gives (the URL is another web server)."""
        request = response.request
        kind = response.headers.get("content-type") or "no content type"
        answered = f"{request.method} {request.url.path} answered HTTP {response.status_code}"
        reason = f"{self.url} is not an a2a-bus gateway: {answered} {kind}, not {expected}"
        return GatewayError(response.status_code, reason)

    def _json(self, response: httpx.Response, status: int = 200) -> dict[str, Any]:
        """The JSON object a gateway answers with ``status``; GatewayError for an
        error or for an answer that is not the gateway's."""
        self._check(response)
        kind = response.headers.get("content-type", "")
        try:
            body = response.json() if kind.startswith("application/json") else None
        except ValueError:
            body = None
        if response.status_code != status or not isinstance(body, dict):
            raise self._stranger(response, "a JSON object")
        return body

    def _event(self, response: httpx.Response, data: str) -> dict[str, Any]:
        """The CloudEvent of a live view's ``data:`` line (a JSON object)."""
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            raise self._stranger(response, "a live view of CloudEvents")
        return event

    async def rpc(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """POST one JSON-RPC message; the response, or None for a notification."""
        response = await self._http.post("/rpc", content=orjson.dumps(message))
        if response.status_code == 204:
            return None
        body = self._json(response)
        if "result" not in body and "error" not in body:
            raise self._stranger(response, "a JSON-RPC response")
        return body

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
        self._json(response, 202)  # anything else did not publish it
        return str(event["id"])

    async def agents(self) -> list[dict[str, Any]]:
        response = await self._http.get("/agents")
        cards = self._json(response).get("agents")
        if not (isinstance(cards, list) and all(isinstance(card, dict) for card in cards)):
            raise self._stranger(response, "a list of agents")
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
        page = self._json(response)
        events, undecodable = page.get("events"), page.get("undecodable")
        if not (
            isinstance(events, list)
            and all(isinstance(event, dict) for event in events)
            and isinstance(undecodable, int)
            and "cursor" in page
        ):
            raise self._stranger(response, "a page of events")
        return page

    async def tail(self, subject: str) -> AsyncIterator[dict[str, Any]]:
        """Structured CloudEvents published on ``subject`` from now on."""
        url = f"/topics/{quote(subject, safe='')}/events"  # '#' would start a fragment
        async with self._http.stream("GET", url, timeout=httpx.Timeout(None)) as response:
            if response.status_code >= 400:
                await response.aread()
                self._check(response)
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                raise self._stranger(response, "a live view (text/event-stream)")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    yield self._event(response, line[len("data: ") :])
        # A live view never ends by itself: a proxy or the gateway closed it.
        raise GatewayError(0, f"the gateway ended the live view of {subject!r}")
