"""Sending push notifications: POSTs to webhooks, retried, at least once.

Each delivery (one status change of a task, for one of its push configs) carries
its delivery id in ``X-A2A-Delivery-Id``, the same on every attempt and from every
gateway; ``X-A2A-Delivery-Attempt`` counts the attempts. A delivery is retried
after a connection error, a timeout, 408, 429 or 5xx, waiting with exponential
backoff and jitter (a 429's or 503's ``Retry-After`` is honoured up to the
longest wait); another answer ends it: 2xx delivered, other 4xx (and 3xx:
redirects are not followed) rejected. So a receiver may get a delivery more than
once (its answer was lost, or a gateway took over) and should drop a delivery id
it has already handled.

The URL is checked against the gateway's policy before each attempt, since the
host's addresses may have changed since the config was registered.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any

import httpx
import orjson

from a2a_bus.gateway.a2a.model import Task
from a2a_bus.gateway.a2a.push import PushConfig, delivery_id, push_payload
from a2a_bus.gateway.a2a.wire import Version
from a2a_bus.gateway.prom import PUSH_DELIVERIES, PUSH_RETRIES
from a2a_bus.gateway.settings import GatewaySettings
from a2a_bus.gateway.url_policy import (
    AllowList,
    RefusedURL,
    Resolver,
    Target,
    Unresolvable,
    check_url,
    resolve,
)
from a2a_bus.protocol import whole_number

log = logging.getLogger(__name__)

#: Deliveries waiting or under way at most; beyond, new ones are dropped (and counted).
MAX_PENDING = 10_000
#: Statuses worth another attempt besides 5xx: the receiver is busy or slow, not refusing.
_RETRY_STATUSES = frozenset({408, 429})


class Outcome(StrEnum):
    """How a delivery ended."""

    DELIVERED = "delivered"  # a 2xx answer
    FAILED = "failed"  # every attempt failed (connection error, timeout, 408, 429, 5xx)
    REJECTED = "rejected"  # the receiver answered 3xx or 4xx: not tried again
    REFUSED = "refused"  # the URL policy refused the URL (its host resolves elsewhere now)
    DROPPED = "dropped"  # too many deliveries pending, or the sender stopped


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a delivery is tried."""

    #: Attempts in all (the first and its retries).
    max_attempts: int = 6
    #: Seconds before the first retry; doubled for each next one.
    backoff: float = 0.5
    #: Longest wait between two attempts.
    backoff_max: float = 30.0
    #: Seconds one POST may take (connecting, sending, the answer's headers).
    timeout: float = 10.0

    @classmethod
    def from_settings(cls, settings: GatewaySettings) -> RetryPolicy:
        return cls(
            settings.push_max_attempts,
            settings.push_backoff,
            settings.push_backoff_max,
            settings.push_timeout,
        )

    def delay(self, attempt: int, retry_after: float | None = None, rand: float = 1.0) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1 for the first).

        ``rand`` in [0, 1] spreads the wait over its upper half (jitter), so
        receivers that come back are not hit by every gateway at once.
        """
        base = min(self.backoff_max, self.backoff * 2 ** (attempt - 1))
        wait = base * (0.5 + rand / 2)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.backoff_max)


class WebhookSender:
    """POSTs push notifications with retries; use as ``async with WebhookSender(...)``.

    :meth:`submit` starts a delivery in the background and returns at once;
    deliveries to one config of one task go out in the order submitted.
    :meth:`deliver` is the same delivery, awaited.
    """

    def __init__(
        self,
        allow: AllowList | None = None,
        retry: RetryPolicy | None = None,
        *,
        resolver: Resolver = resolve,
        max_pending: int = MAX_PENDING,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.allow = allow if allow is not None else AllowList()
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_pending = max_pending
        self._resolver = resolver
        self._rand = rand
        self._client: httpx.AsyncClient | None = None
        self._pending: set[asyncio.Future[Outcome]] = set()
        #: The latest delivery per (task, config), which the next one waits for.
        self._last: dict[tuple[str, str], asyncio.Future[Outcome]] = {}

    @classmethod
    def from_settings(cls, settings: GatewaySettings, **options: Any) -> WebhookSender:
        """A sender with the gateway's allow-list and retry settings."""
        return cls(
            AllowList.parse(settings.push_allow), RetryPolicy.from_settings(settings), **options
        )

    # -- life --------------------------------------------------------------------------

    async def start(self) -> None:
        if self._client is None:
            # No redirects: a redirect could lead past the URL policy.
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.retry.timeout),
                follow_redirects=False,
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            )

    async def stop(self) -> None:
        """Stop: deliveries still pending are abandoned (counted as dropped)."""
        pending = list(self._pending)
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.wait(pending)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> WebhookSender:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def pending(self) -> int:
        """Deliveries waiting or under way."""
        return len(self._pending)

    async def drain(self) -> None:
        """Wait until every delivery submitted so far has ended."""
        while self._pending:
            await asyncio.wait(list(self._pending))

    # -- delivering ----------------------------------------------------------------------

    def notify(
        self, task: Task, task_version: int, configs: Iterable[PushConfig]
    ) -> list[asyncio.Future[Outcome]]:
        """Deliver the task's status change number ``task_version`` to each config, in
        the background: the payload of each version rendered once, now (the task may
        change before the POST), with the change's delivery id."""
        payloads: dict[Version, bytes] = {}
        futures = []
        for config in configs:
            payload = payloads.get(config.version)
            if payload is None:
                payload = payloads[config.version] = push_payload(task, config.version)
            change = delivery_id(task.id, task_version, config.config_id)
            futures.append(self.submit(config, payload, change))
        return futures

    def submit(
        self, config: PushConfig, payload: bytes | dict[str, Any], delivery_id: str
    ) -> asyncio.Future[Outcome]:
        """Start delivering in the background; the future tells how it ended."""
        if len(self._pending) >= self.max_pending:
            log.warning(
                "push to config %r of task %r dropped: %d deliveries pending",
                config.config_id,
                config.task_id,
                len(self._pending),
            )
            PUSH_DELIVERIES.labels(Outcome.DROPPED.value).inc()
            dropped: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
            dropped.set_result(Outcome.DROPPED)
            return dropped
        key = (config.task_id, config.config_id)
        runner = asyncio.ensure_future(
            self._after(self._last.get(key), config, payload, delivery_id)
        )
        self._pending.add(runner)
        self._last[key] = runner

        def ended(done: asyncio.Future[Outcome]) -> None:
            self._pending.discard(done)
            if self._last.get(key) is done:
                del self._last[key]
            if done.cancelled():
                PUSH_DELIVERIES.labels(Outcome.DROPPED.value).inc()

        runner.add_done_callback(ended)
        return runner

    async def _after(
        self,
        previous: asyncio.Future[Outcome] | None,
        config: PushConfig,
        payload: bytes | dict[str, Any],
        delivery_id: str,
    ) -> Outcome:
        if previous is not None and not previous.done():
            await asyncio.wait({previous})
        return await self.deliver(config, payload, delivery_id)

    async def deliver(
        self, config: PushConfig, payload: bytes | dict[str, Any], delivery_id: str
    ) -> Outcome:
        """POST ``payload`` to the config's webhook until it is taken, refused, or the
        attempts run out; counted in ``a2a_push_deliveries`` by outcome."""
        client = self._client
        if client is None:
            raise RuntimeError("WebhookSender is not started")
        body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        where = f"push {delivery_id} to config {config.config_id!r} of task {config.task_id!r}"
        outcome = Outcome.FAILED
        for attempt in range(1, self.retry.max_attempts + 1):
            retry_after: float | None = None
            try:
                checked = await check_url(config.url, self.allow, self._resolver)
                url, headers = _pinned(config.url, checked, config.headers(delivery_id, attempt))
                async with client.stream("POST", url, content=body, headers=headers) as r:
                    status = r.status_code  # the body is not read: nothing in it matters
                    retry_after = _retry_after(r.headers.get("retry-after"))
            except Unresolvable as exc:
                log.info("%s: attempt %d: %s", where, attempt, exc)
            except RefusedURL as exc:
                log.warning("%s refused: %s", where, exc)
                outcome = Outcome.REFUSED
                break
            except httpx.TransportError as exc:
                log.info("%s: attempt %d: %s", where, attempt, type(exc).__name__)
            except Exception:  # this gateway's fault, not the receiver's: counted, not retried
                log.exception("%s failed", where)
                break
            else:
                if 200 <= status < 300:
                    outcome = Outcome.DELIVERED
                    break
                if status < 500 and status not in _RETRY_STATUSES:
                    log.warning("%s rejected: the receiver answered %d", where, status)
                    outcome = Outcome.REJECTED
                    break
                log.info("%s: attempt %d: the receiver answered %d", where, attempt, status)
            if attempt == self.retry.max_attempts:
                log.warning("%s failed after %d attempts", where, attempt)
                break
            PUSH_RETRIES.inc()
            await asyncio.sleep(self.retry.delay(attempt, retry_after, self._rand()))
        PUSH_DELIVERIES.labels(outcome.value).inc()
        return outcome


def _pinned(url: str, checked: Target, headers: dict[str, str]) -> tuple[httpx.URL, dict[str, str]]:
    """A plain-HTTP URL aimed at the address that was checked, with the host in ``Host``.

    Else the connection would resolve the host again, and a host whose DNS answers a
    public address to the check and a private one to the connection (rebinding) would
    lead past the policy. HTTPS needs no pin: a private server cannot show a valid
    certificate for the client's host name, so the TLS handshake fails there.
    """
    parsed = httpx.URL(url)
    if checked.scheme != "http" or not checked.addresses or checked.addresses[0] == checked.host:
        return parsed, headers
    address = checked.addresses[0].split("%", 1)[0]
    return parsed.copy_with(host=address), {**headers, "Host": parsed.netloc.decode("ascii")}


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (only its delta-seconds form)."""
    seconds = whole_number(value)
    return None if seconds is None else float(seconds)
