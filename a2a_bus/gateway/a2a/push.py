"""A2A push-notification configs: the model, its methods' wire shapes, the payloads.

A client registers a webhook for a task (``CreateTaskPushNotificationConfig`` in
1.0, ``tasks/pushNotificationConfig/set`` in 0.3, or inline in the send's
configuration); the gateway then POSTs each status change of the task to it.
1.0 shapes are the ProtoJSON of ``TaskPushNotificationConfig`` (flat: ``taskId``,
``id``, ``url``, ``token``, ``authentication: {scheme, credentials}``); 0.3 nests
the config (``{taskId, pushNotificationConfig: {id, url, token, authentication:
{schemes: [...], credentials}}}``) and names the config ``pushNotificationConfigId``.
A config without an id gets the task's id, as the A2A SDK does.

What is POSTed follows the version the config was registered with: 1.0 a
``StreamResponse`` (``{"statusUpdate": ...}``), 0.3 the task object.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import orjson

from a2a_bus.gateway.a2a.errors import A2ACode, A2AError, invalid_params
from a2a_bus.gateway.a2a.model import Task
from a2a_bus.gateway.a2a.params import as_object
from a2a_bus.gateway.a2a.wire import Version, status_update, task_json
from a2a_bus.gateway.url_policy import AllowList, RefusedURL, Resolver, check_url, resolve
from a2a_bus.protocol import whole_number

#: Longest URL, token or credentials accepted (they are kept and sent with every push).
MAX_FIELD = 2048
#: The header that carries the config's token, as the A2A SDK names it.
TOKEN_HEADER = "X-A2A-Notification-Token"
#: The header that carries the delivery id: the same on every attempt (and from any
#: gateway) for one status change and one config, so a receiver drops repeats.
DELIVERY_HEADER = "X-A2A-Delivery-Id"
#: The header that counts attempts at one delivery (1 for the first).
ATTEMPT_HEADER = "X-A2A-Delivery-Attempt"
#: Derives delivery ids; fixed so every gateway derives the same id.
_DELIVERY_NAMESPACE = uuid.UUID("6f1c2a8e-5b0d-4f5e-9a51-3c7d2b9e8a40")


class PushOp(Enum):
    SET = "set"
    GET = "get"
    LIST = "list"
    DELETE = "delete"


#: The push-config methods, in both versions.
PUSH_METHODS: dict[str, tuple[PushOp, Version]] = {
    "CreateTaskPushNotificationConfig": (PushOp.SET, Version.V1),
    "GetTaskPushNotificationConfig": (PushOp.GET, Version.V1),
    "ListTaskPushNotificationConfigs": (PushOp.LIST, Version.V1),
    "DeleteTaskPushNotificationConfig": (PushOp.DELETE, Version.V1),
    "tasks/pushNotificationConfig/set": (PushOp.SET, Version.V03),
    "tasks/pushNotificationConfig/get": (PushOp.GET, Version.V03),
    "tasks/pushNotificationConfig/list": (PushOp.LIST, Version.V03),
    "tasks/pushNotificationConfig/delete": (PushOp.DELETE, Version.V03),
}


@dataclass(frozen=True)
class PushAuth:
    """How the gateway authenticates to the webhook: ``Authorization: <scheme> <credentials>``.

    0.3 lists schemes, 1.0 has one: the first is used.
    """

    schemes: tuple[str, ...]
    credentials: str | None = None

    def header(self) -> str | None:
        """The ``Authorization`` value, or None without a scheme and credentials."""
        if not self.schemes or not self.credentials:
            return None
        return f"{self.schemes[0]} {self.credentials}"


@dataclass(frozen=True)
class PushConfig:
    """A webhook registered for a task; ``version`` is the protocol it was registered in."""

    task_id: str
    config_id: str
    url: str
    token: str | None = None
    auth: PushAuth | None = None
    version: Version = Version.V1

    def for_task(self, task_id: str) -> PushConfig:
        """This config bound to a task (an inline config is parsed before its task exists)."""
        return replace(self, task_id=task_id, config_id=self.config_id or task_id)

    def headers(self, delivery_id: str, attempt: int) -> dict[str, str]:
        """The headers of one POST of a delivery."""
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: delivery_id,
            ATTEMPT_HEADER: str(attempt),
        }
        if self.token:
            headers[TOKEN_HEADER] = self.token
        authorization = self.auth.header() if self.auth is not None else None
        if authorization is not None:
            headers["Authorization"] = authorization
        return headers

    def to_dict(self) -> dict[str, Any]:
        """A JSON object of the config (for the bus), read back by :meth:`from_dict`."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "id": self.config_id,
            "url": self.url,
            "version": self.version.value,
        }
        if self.token is not None:
            out["token"] = self.token
        if self.auth is not None:
            out["authentication"] = {
                "schemes": list(self.auth.schemes),
                "credentials": self.auth.credentials,
            }
        return out

    @classmethod
    def from_dict(cls, data: Any) -> PushConfig:
        """The config :meth:`to_dict` wrote; ValueError for anything else (the task log
        and the task stores are shared: a record there may be anyone's)."""
        try:
            body = as_object(data, "config")
            auth: PushAuth | None = None
            if body.get("authentication") is not None:
                given = as_object(body["authentication"], "config.authentication")
                schemes = given.get("schemes")
                if not isinstance(schemes, list):
                    raise invalid_params("config.authentication.schemes must be a list")
                auth = PushAuth(
                    tuple(_header_text(s, "config.authentication.schemes") or "" for s in schemes),
                    _header_text(given.get("credentials"), "config.authentication.credentials"),
                )
            return cls(
                task_id=_required(body.get("taskId"), "config.taskId"),
                config_id=_required(body.get("id"), "config.id"),
                url=_required(body.get("url"), "config.url"),
                token=_header_text(body.get("token"), "config.token"),
                auth=auth,
                version=Version(body.get("version", Version.V1.value)),
            )
        except A2AError as exc:
            raise ValueError(exc.message) from None


@dataclass(frozen=True)
class PushQuery:
    """Which configs a get, list or delete names (``config_id`` None: all of the task's)."""

    task_id: str
    config_id: str | None = None
    page_size: int | None = None
    page_token: str | None = None


# -- parsing -------------------------------------------------------------------------


def parse_set(params: Any, version: Version) -> PushConfig:
    """The config of a ``CreateTaskPushNotificationConfig`` or ``.../set`` (URL not checked)."""
    body = as_object(params, "params")
    task_id = _required(body.get("taskId"), "params.taskId")
    if version is Version.V1:
        config = _config(body, "params", version)
    else:
        inner = as_object(body.get("pushNotificationConfig"), "params.pushNotificationConfig")
        config = _config(inner, "params.pushNotificationConfig", version)
    return config.for_task(task_id)


def parse_send_push(configuration: Any, version: Version) -> PushConfig | None:
    """The webhook a send's ``configuration`` registers, if any, not bound to a task yet
    (see :meth:`PushConfig.for_task`)."""
    if not isinstance(configuration, dict):
        return None
    key = "taskPushNotificationConfig" if version is Version.V1 else "pushNotificationConfig"
    raw = configuration.get(key)
    if raw is None:
        return None
    where = f"params.configuration.{key}"
    return _config(as_object(raw, where), where, version)


def parse_query(params: Any, op: PushOp, version: Version) -> PushQuery:
    """The task and config a get, list or delete names.

    1.0: ``{taskId, id}`` (list: ``{taskId, pageSize, pageToken}``); 0.3: ``{id,
    pushNotificationConfigId}`` with ``id`` the task's. A get without a config id
    names the task's default config (whose id is the task's).
    """
    body = as_object(params, "params")
    task_key, config_key = ("taskId", "id") if version is Version.V1 else ("id", None)
    config_key = config_key or "pushNotificationConfigId"
    task_id = _required(body.get(task_key), f"params.{task_key}")
    if op is PushOp.LIST:
        size = body.get("pageSize")
        if size is not None and (
            isinstance(size, bool) or not isinstance(size, int | float) or size < 0
        ):
            raise invalid_params("params.pageSize must be a non-negative integer")
        token = _string(body.get("pageToken"), "params.pageToken")
        return PushQuery(task_id, None, int(size) if size else None, token)
    if op is PushOp.DELETE and version is Version.V03:
        return PushQuery(task_id, _required(body.get(config_key), f"params.{config_key}"))
    return PushQuery(task_id, _string(body.get(config_key), f"params.{config_key}") or task_id)


def _config(body: dict[str, Any], where: str, version: Version) -> PushConfig:
    url = _required(body.get("url"), f"{where}.url")
    auth_raw = body.get("authentication")
    auth = None
    if auth_raw is not None:
        auth_body = as_object(auth_raw, f"{where}.authentication")
        credentials = _header_text(
            auth_body.get("credentials"), f"{where}.authentication.credentials"
        )
        if version is Version.V1:
            scheme = _header_text(auth_body.get("scheme"), f"{where}.authentication.scheme")
            schemes: tuple[str, ...] = (scheme,) if scheme else ()
        else:
            raw_schemes = auth_body.get("schemes", [])
            if not isinstance(raw_schemes, list) or not all(
                isinstance(s, str) and s for s in raw_schemes
            ):
                raise invalid_params(f"{where}.authentication.schemes must be a list of strings")
            schemes = tuple(
                _header_text(s, f"{where}.authentication.schemes[{i}]") or ""
                for i, s in enumerate(raw_schemes)
            )
        auth = PushAuth(schemes, credentials)
    return PushConfig(
        task_id="",
        config_id=_string(body.get("id"), f"{where}.id") or "",
        url=url,
        token=_header_text(body.get("token"), f"{where}.token"),
        auth=auth,
        version=version,
    )


def _required(value: Any, what: str) -> str:
    found = _string(value, what)
    if found is None:
        raise invalid_params(f"{what} is required")
    return found


def _string(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise invalid_params(f"{what} must be a string")
    if len(value) > MAX_FIELD:
        raise invalid_params(f"{what} is longer than {MAX_FIELD} characters")
    return value


def _header_text(value: Any, what: str) -> str | None:
    """A string sent in a webhook's HTTP headers: printable ASCII, so that every
    delivery can carry it (checked when the config is set, not at each POST)."""
    text = _string(value, what)
    if text is not None and not (text.isascii() and text.isprintable()):
        raise invalid_params(
            f"{what} must be printable ASCII (it is sent in an HTTP header): "
            "no control characters, line breaks or non-ASCII letters"
        )
    return text


async def check_push_url(
    config: PushConfig, allow: AllowList, resolver: Resolver = resolve
) -> None:
    """Refuse a config whose URL the gateway may not call: Invalid params, with the reason."""
    try:
        await check_url(config.url, allow, resolver)
    except RefusedURL as exc:
        raise invalid_params(f"push notification URL refused: {exc}", url=config.url) from None


def config_not_found(query: PushQuery) -> A2AError:
    """A get of a config the task does not have (the SDK answers Task not found too)."""
    return A2AError(
        A2ACode.TASK_NOT_FOUND,
        f"Task {query.task_id!r} has no push notification config {query.config_id!r}",
        {"taskId": query.task_id, "configId": str(query.config_id)},
    )


# -- rendering -----------------------------------------------------------------------


def config_json(config: PushConfig, version: Version) -> dict[str, Any]:
    """The result of a set or get: the config, in the caller's version."""
    inner: dict[str, Any] = {"id": config.config_id, "url": config.url}
    if config.token is not None:
        inner["token"] = config.token
    if config.auth is not None:
        auth: dict[str, Any]
        if version is Version.V1:
            auth = {"scheme": config.auth.schemes[0]} if config.auth.schemes else {}
        else:
            auth = {"schemes": list(config.auth.schemes)}
        if config.auth.credentials is not None:
            auth["credentials"] = config.auth.credentials
        inner["authentication"] = auth
    if version is Version.V1:
        return {"taskId": config.task_id, **inner}
    return {"taskId": config.task_id, "pushNotificationConfig": inner}


def list_json(configs: list[PushConfig], query: PushQuery, version: Version) -> Any:
    """The result of a list: 1.0 ``{configs, nextPageToken}`` (paged), 0.3 an array."""
    if version is Version.V03:
        return [config_json(c, version) for c in configs]
    start = 0
    if query.page_token is not None:
        token = whole_number(query.page_token)
        if token is None:
            raise invalid_params("params.pageToken is not a token this agent gave")
        start = token
    end = len(configs) if query.page_size is None else start + query.page_size
    out: dict[str, Any] = {"configs": [config_json(c, version) for c in configs[start:end]]}
    if end < len(configs):
        out["nextPageToken"] = str(end)
    return out


def push_payload(task: Task, version: Version) -> bytes:
    """The body POSTed for a task's status change: 1.0 a ``StreamResponse`` with the
    ``statusUpdate``, 0.3 the task (as the SDKs of each version send)."""
    body = status_update(task, version) if version is Version.V1 else task_json(task, version)
    return orjson.dumps(body)


def delivery_id(task_id: str, task_version: int, config_id: str) -> str:
    """The id of the delivery of one status change (the task's ``task_version``) to one
    config: derived, so every attempt and every gateway sends the same id."""
    return str(uuid.uuid5(_DELIVERY_NAMESPACE, f"{task_id}\n{task_version}\n{config_id}"))


#: Webhooks one task may have: each status change is POSTed to each of them (the
#: configs themselves are records of the task log, kept by the task's fold).
MAX_CONFIGS_PER_TASK = 10
