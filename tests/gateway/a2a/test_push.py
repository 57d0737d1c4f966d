"""Push-notification configs on the wire, checked against the ``a2a-sdk``'s own types:
what the SDK sends parses, what we render the SDK reads back, in 1.0 and 0.3; the
payloads; delivery ids; the per-task registry; refused URLs as A2A errors."""

from __future__ import annotations

import orjson
import pytest
from a2a.compat.v0_3 import types as v03
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_bus.gateway.a2a.errors import A2ACode, A2AError
from a2a_bus.gateway.a2a.model import Message, Part, Task, TaskState
from a2a_bus.gateway.a2a.push import (
    PUSH_METHODS,
    PushAuth,
    PushConfig,
    PushOp,
    PushQuery,
    check_push_url,
    config_json,
    delivery_id,
    list_json,
    parse_query,
    parse_send_push,
    parse_set,
    push_payload,
)
from a2a_bus.gateway.a2a.wire import UNSUPPORTED, Version
from a2a_bus.gateway.url_policy import AllowList

V1, V03 = Version.V1, Version.V03
BAD = {"schemes": "Bearer"}  # 0.3 lists schemes


def sdk_config() -> pb.TaskPushNotificationConfig:
    config = pb.TaskPushNotificationConfig(
        task_id="t1", id="c1", url="https://hooks.example/a2a", token="tok"
    )
    config.authentication.scheme = "Bearer"
    config.authentication.credentials = "secret"
    return config


def test_the_method_names_are_the_sdks() -> None:
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

    v1 = {name for name, (_, version) in PUSH_METHODS.items() if version is V1}
    assert v1 <= set(JsonRpcDispatcher.METHOD_TO_MODEL)
    # The binding serves them: none is among the names it refuses as not offered.
    assert not set(PUSH_METHODS) & set(UNSUPPORTED)
    assert {op for op, _ in PUSH_METHODS.values()} == set(PushOp)


def test_a_v1_create_parses_and_renders_as_the_sdk_writes_it() -> None:
    params = MessageToDict(sdk_config())
    config = parse_set(params, V1)
    assert config == PushConfig(
        "t1", "c1", "https://hooks.example/a2a", "tok", PushAuth(("Bearer",), "secret"), V1
    )
    assert config_json(config, V1) == params
    assert ParseDict(config_json(config, V1), pb.TaskPushNotificationConfig()) == sdk_config()


def test_a_v03_set_parses_and_renders_as_the_sdk_writes_it() -> None:
    sdk = v03.TaskPushNotificationConfig(
        task_id="t1",
        push_notification_config=v03.PushNotificationConfig(
            id="c1",
            url="https://hooks.example/a2a",
            token="tok",
            authentication=v03.PushNotificationAuthenticationInfo(
                schemes=["Bearer", "Basic"], credentials="secret"
            ),
        ),
    )
    params = sdk.model_dump(mode="json", by_alias=True, exclude_none=True)
    config = parse_set(params, V03)
    assert config.auth == PushAuth(("Bearer", "Basic"), "secret")
    assert config.version is V03
    assert config_json(config, V03) == params
    assert v03.TaskPushNotificationConfig.model_validate(config_json(config, V03)) == sdk


def test_a_config_without_id_takes_the_tasks() -> None:
    config = parse_set({"taskId": "t1", "url": "https://hooks.example/"}, V1)
    assert (config.config_id, config.token, config.auth) == ("t1", None, None)
    assert config_json(config, V1) == {"taskId": "t1", "id": "t1", "url": "https://hooks.example/"}


@pytest.mark.parametrize(
    ("params", "version", "message"),
    [
        ([], V1, "params must be an object"),
        ({"url": "https://h.example/"}, V1, "params.taskId is required"),
        ({"taskId": "t1"}, V1, "params.url is required"),
        ({"taskId": "t1", "url": 5}, V1, "params.url must be a string"),
        ({"taskId": "t1", "url": "https://h/" + "x" * 3000}, V1, "longer than 2048"),
        ({"taskId": "t1", "url": "u", "authentication": "x"}, V1, "authentication must be"),
        ({"taskId": "t1"}, V03, "params.pushNotificationConfig must be an object"),
        (
            {
                "taskId": "t1",
                "pushNotificationConfig": {"url": "u", "authentication": {"schemes": "B"}},
            },
            V03,
            "schemes",
        ),
        # Sent in HTTP headers: what no header can carry is refused when set, not
        # found out at each delivery.
        ({"taskId": "t1", "url": "u", "token": "tökén"}, V1, "token must be printable ASCII"),
        ({"taskId": "t1", "url": "u", "token": "a\r\nX-Evil: 1"}, V1, "token must be printable"),
        (
            {"taskId": "t1", "url": "u", "authentication": {"scheme": "B", "credentials": "x\ny"}},
            V1,
            "credentials must be printable ASCII",
        ),
        (
            {"taskId": "t1", "url": "u", "authentication": {"scheme": "Bé", "credentials": "x"}},
            V1,
            "scheme must be printable ASCII",
        ),
        (
            {
                "taskId": "t1",
                "pushNotificationConfig": {"url": "u", "authentication": {"schemes": ["B\t"]}},
            },
            V03,
            r"schemes\[0\] must be printable ASCII",
        ),
    ],
)
def test_a_bad_config_is_invalid_params(params: object, version: Version, message: str) -> None:
    with pytest.raises(A2AError, match=message) as refused:
        parse_set(params, version)
    assert refused.value.code is A2ACode.INVALID_PARAMS


def test_queries_of_both_versions() -> None:
    get = MessageToDict(pb.GetTaskPushNotificationConfigRequest(task_id="t1", id="c1"))
    assert parse_query(get, PushOp.GET, V1) == PushQuery("t1", "c1")
    delete = MessageToDict(pb.DeleteTaskPushNotificationConfigRequest(task_id="t1", id="c1"))
    assert parse_query(delete, PushOp.DELETE, V1) == PushQuery("t1", "c1")
    listing = MessageToDict(
        pb.ListTaskPushNotificationConfigsRequest(task_id="t1", page_size=2, page_token="2")
    )
    assert parse_query(listing, PushOp.LIST, V1) == PushQuery("t1", None, 2, "2")
    get03 = v03.GetTaskPushNotificationConfigParams(id="t1", push_notification_config_id="c1")
    dumped = get03.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert parse_query(dumped, PushOp.GET, V03) == PushQuery("t1", "c1")
    assert parse_query({"id": "t1"}, PushOp.GET, V03) == PushQuery("t1", "t1")
    assert parse_query({"id": "t1"}, PushOp.LIST, V03) == PushQuery("t1")
    with pytest.raises(A2AError, match=r"params.pushNotificationConfigId is required"):
        parse_query({"id": "t1"}, PushOp.DELETE, V03)
    with pytest.raises(A2AError, match=r"pageSize must be a non-negative integer"):
        parse_query({"taskId": "t1", "pageSize": -1}, PushOp.LIST, V1)


def test_a_send_can_carry_a_config() -> None:
    request = pb.SendMessageRequest()
    request.configuration.task_push_notification_config.url = "https://hooks.example/"
    request.configuration.task_push_notification_config.token = "tok"
    configuration = MessageToDict(request)["configuration"]
    draft = parse_send_push(configuration, V1)
    assert draft is not None
    assert draft.for_task("t9") == PushConfig("t9", "t9", "https://hooks.example/", "tok")
    legacy = {"blocking": True, "pushNotificationConfig": {"url": "https://h.example/", "id": "a"}}
    draft03 = parse_send_push(legacy, V03)
    assert draft03 is not None
    assert draft03.for_task("t9") == PushConfig("t9", "a", "https://h.example/", version=V03)
    assert parse_send_push({"blocking": True}, V03) is None
    assert parse_send_push(None, V1) is None


def test_lists_render_as_the_sdk_reads_them() -> None:
    configs = [PushConfig("t1", f"c{i}", f"https://h.example/{i}") for i in range(5)]
    first = list_json(configs, PushQuery("t1", None, 2), V1)
    response = ParseDict(first, pb.ListTaskPushNotificationConfigsResponse())
    assert [c.id for c in response.configs] == ["c0", "c1"]
    rest = list_json(configs, PushQuery("t1", None, None, response.next_page_token), V1)
    assert [c["id"] for c in rest["configs"]] == ["c2", "c3", "c4"]
    assert "nextPageToken" not in rest
    legacy = list_json(configs, PushQuery("t1"), V03)
    parsed = [v03.TaskPushNotificationConfig.model_validate(c) for c in legacy]
    assert [c.push_notification_config.id for c in parsed] == [f"c{i}" for i in range(5)]
    for token in ("abc", "\u00b2", "9" * 5000):  # '²' passes str.isdigit, int() refuses it
        with pytest.raises(A2AError, match=r"pageToken"):
            list_json(configs, PushQuery("t1", None, None, token), V1)


def test_the_payloads_are_what_each_version_posts() -> None:
    task = Task("ctx", [Message("user", [Part.text("hi")])], id="t1")
    task.set_state(TaskState.COMPLETED, task.agent_message([Part.text("done")]))
    v1 = ParseDict(orjson.loads(push_payload(task, V1)), pb.StreamResponse())
    assert v1.status_update.task_id == "t1"
    assert v1.status_update.status.state == pb.TaskState.TASK_STATE_COMPLETED
    legacy = v03.Task.model_validate(orjson.loads(push_payload(task, V03)))
    assert (legacy.id, legacy.status.state) == ("t1", v03.TaskState.completed)


def test_delivery_ids_are_the_same_for_the_same_change_only() -> None:
    first = delivery_id("t1", 3, "c1")
    assert first == delivery_id("t1", 3, "c1")
    others = {delivery_id("t1", 4, "c1"), delivery_id("t1", 3, "c2"), delivery_id("t2", 3, "c1")}
    assert first not in others
    assert len(others) == 3


def test_headers_carry_token_delivery_and_authorization() -> None:
    config = PushConfig("t1", "c1", "https://h.example/", "tok", PushAuth(("Bearer",), "s"))
    headers = config.headers("d1", 2)
    assert headers["X-A2A-Notification-Token"] == "tok"
    assert headers["X-A2A-Delivery-Id"] == "d1"
    assert headers["X-A2A-Delivery-Attempt"] == "2"
    assert headers["Authorization"] == "Bearer s"
    bare = PushConfig("t1", "c1", "https://h.example/").headers("d1", 1)
    assert "X-A2A-Notification-Token" not in bare
    assert "Authorization" not in bare


def test_a_config_survives_the_trip_through_json() -> None:
    config = PushConfig("t1", "c1", "https://h/", "tok", PushAuth(("Basic",), None), V03)
    assert PushConfig.from_dict(orjson.loads(orjson.dumps(config.to_dict()))) == config


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/hook", "127.0.0.1 is a loopback address"),
        ("http://localhost:9/hook", "'localhost' resolves to .* loopback"),
        ("http://10.0.0.1/hook", "10.0.0.1 is a private address"),
        ("ftp://hooks.example/", "only http and https"),
    ],
)
async def test_a_refused_url_is_a_clear_invalid_params(url: str, reason: str) -> None:
    config = PushConfig("t1", "c1", url)
    with pytest.raises(A2AError, match=rf"push notification URL refused: .*{reason}") as refused:
        await check_push_url(config, AllowList())
    error = refused.value.response(7, legacy=False)["error"]
    assert error["code"] == -32602
    assert error["data"][0]["metadata"] == {"url": url}


async def test_an_allowed_loopback_url_passes() -> None:
    config = PushConfig("t1", "c1", "http://127.0.0.1:9/hook")
    await check_push_url(config, AllowList.parse("127.0.0.1/32"))
