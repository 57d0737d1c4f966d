"""A2A tasks as records on the bus, on the in-memory transport: ListTasks (filters,
pages), SubscribeToTask (the task, then the rest; Last-Event-ID resumes without
repeats), idempotent sends, multi-turn tasks (InputRequired), cancel reaching a
plain handler, progress and the inactivity deadline, and push notifications to a
real local webhook (retried after a 500 with one delivery id)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import orjson
import pytest
from a2a.helpers.proto_helpers import get_artifact_text, new_text_part
from a2a.types import a2a_pb2 as pb

from a2a_bus import Agent, InputRequired, method
from a2a_bus.bus import Bus
from a2a_bus.gateway import GatewaySettings, create_app
from tests.buses import eventually

from ..conftest import WAIT
from .test_a2a import BASE, a2a_client, send, user_message, within
from .test_webhooks import Receiver, receiver  # noqa: F401 (a fixture)

pytestmark = pytest.mark.timeout(120)

INACTIVITY = 0.6  # seconds: the tasks' inactivity limit here


class Desk(Agent):
    """Books trips: asks for the city it needs, works slowly when told to."""

    agent_id = "desk"

    def __init__(self) -> None:
        self.pending: set[str] = set()
        self.runs: dict[str, int] = {}
        self.stopped = threading.Event()

    @method
    def message(self, text: str, session_id: str) -> str:
        self.runs[text] = self.runs.get(text, 0) + 1
        if text == "book" and session_id not in self.pending:
            self.pending.add(session_id)
            raise InputRequired("Which city?")
        if session_id in self.pending:
            self.pending.discard(session_id)
            return f"booked {text}"
        return f"noted {text}"

    @method
    def work(self, beats: int, beat: float) -> str:
        """Reports progress each beat; stops early when canceled."""
        for i in range(beats):
            if self.cancelled:
                self.stopped.set()
                return "stopped"
            self.progress(f"beat {i}")
            time.sleep(beat)
        return "worked"

    @method
    def silent(self, seconds: float) -> str:
        time.sleep(seconds)
        return "late"


@pytest.fixture
async def desk_bus() -> AsyncIterator[tuple[Bus, Desk]]:
    async with Bus.memory() as running:
        instances: list[Desk] = []

        class Tracked(Desk):
            agent_id = "desk"

            def __init__(self) -> None:
                super().__init__()
                instances.append(self)

        await running.aspawn(Tracked)
        yield running, instances[0]


def settings(**more: Any) -> GatewaySettings:
    return GatewaySettings(
        request_timeout=WAIT, a2a_task_inactivity=INACTIVITY, push_allow=("127.0.0.1",), **more
    )


@pytest.fixture
async def http(desk_bus: tuple[Bus, Desk]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(desk_bus[0], settings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE, timeout=WAIT) as client:
        yield client


async def rpc(http: httpx.AsyncClient, method_name: str, params: Any, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method_name, "params": params}
    response = await within(http.post("/a2a/desk", content=orjson.dumps(body), headers=headers))
    assert response.status_code == 200, response.text
    return response.json()


def text_message(text: str, **more: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **more}


def call_message(name: str, **params: Any) -> dict[str, Any]:
    part = {"data": {"method": name, "params": params}}
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [part]}


async def start(http: httpx.AsyncClient, message: dict[str, Any], **config: Any) -> dict[str, Any]:
    params = {"message": message, "configuration": {"returnImmediately": True, **config}}
    task: dict[str, Any] = (await rpc(http, "SendMessage", params))["result"]["task"]
    return task


async def settled(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    while True:
        task: dict[str, Any] = (await rpc(http, "GetTask", {"id": task_id}))["result"]
        if task["status"]["state"] not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
            return task
        await asyncio.sleep(0.02)


# -- ListTasks ---------------------------------------------------------------------------


async def test_list_tasks_filters_and_pages(http: httpx.AsyncClient) -> None:
    made = []
    for i in range(5):
        task = await start(http, text_message(f"n{i}", contextId="ctx-a" if i < 3 else "ctx-b"))
        made.append((await within(settled(http, task["id"])))["id"])
    every = (await rpc(http, "ListTasks", {}))["result"]
    assert every["totalSize"] == 5 and every["nextPageToken"] == ""
    assert [t["id"] for t in every["tasks"]] == made[::-1]  # newest status first
    assert all("artifacts" not in t for t in every["tasks"])  # unless asked for
    in_a = await rpc(http, "ListTasks", {"contextId": "ctx-a", "includeArtifacts": True})
    assert [t["id"] for t in in_a["result"]["tasks"]] == made[2::-1]
    assert in_a["result"]["tasks"][0]["artifacts"][0]["parts"] == [{"text": "noted n2"}]
    pages, token = [], None
    while True:
        params: dict[str, Any] = {"pageSize": 2, **({"pageToken": token} if token else {})}
        result = (await rpc(http, "ListTasks", params))["result"]
        pages.append([t["id"] for t in result["tasks"]])
        token = result["nextPageToken"]
        if not token:
            break
    assert pages == [made[4:2:-1], made[2:0:-1], made[0:1]]
    done = (await rpc(http, "ListTasks", {"status": "TASK_STATE_COMPLETED"}))["result"]
    assert done["totalSize"] == 5
    none = (await rpc(http, "ListTasks", {"status": "TASK_STATE_WORKING"}))["result"]
    assert none["tasks"] == [] and none["totalSize"] == 0
    later = await rpc(http, "ListTasks", {"statusTimestampAfter": "2999-01-01T00:00:00Z"})
    assert later["result"]["tasks"] == []
    bad = await rpc(http, "ListTasks", {"pageToken": "not-a-token"})
    assert bad["error"]["code"] == -32602


async def _listed_after(http: httpx.AsyncClient, after: str) -> list[str]:
    answer = await rpc(http, "ListTasks", {"statusTimestampAfter": after})
    assert "result" in answer, answer
    return [task["id"] for task in answer["result"]["tasks"]]


async def test_list_tasks_filters_by_an_rfc_3339_instant_in_any_offset(
    http: httpx.AsyncClient,
) -> None:
    task = await start(http, text_message("when"))
    stamp = (await within(settled(http, task["id"])))["status"]["timestamp"]
    moment = datetime.fromisoformat(stamp)
    india = timezone(timedelta(hours=5, minutes=30))
    same = [
        stamp,
        stamp.replace("T", "t").replace("Z", "z"),  # RFC 3339 letters are case-insensitive
        moment.astimezone(india).isoformat(),
        f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}000Z",  # protobuf's nanoseconds
    ]
    for after in same:
        assert await _listed_after(http, after) == [task["id"]], after
    later = (moment + timedelta(milliseconds=1)).astimezone(india).isoformat()
    assert await _listed_after(http, later) == []


@pytest.mark.parametrize(
    "after",
    [
        "20261205",  # ISO 8601 basic forms, week and ordinal dates: not RFC 3339
        "20261205T100000Z",
        "2026-W49",
        "2026-339",
        "2026-12-05",
        "2026-12-05T10:00:00",  # no offset: no instant
        "2026-12-05T10:00Z",
        "2026-12-05 10:00:00Z",
        "2026-13-05T10:00:00Z",
        "\uff12\uff10\uff12\uff16-12-05T10:00:00Z",  # full-width digits
        1764928800,
    ],
)
async def test_list_tasks_refuses_a_timestamp_that_is_not_rfc_3339(
    http: httpx.AsyncClient, after: Any
) -> None:
    answer = await rpc(http, "ListTasks", {"statusTimestampAfter": after})
    assert answer["id"] == 1 and answer["error"]["code"] == -32602, answer
    assert "statusTimestampAfter must be an RFC 3339 timestamp" in answer["error"]["message"]


# -- idempotent sends, multi-turn --------------------------------------------------------


async def test_a_repeated_send_returns_its_task_and_runs_once(
    http: httpx.AsyncClient, desk_bus: tuple[Bus, Desk]
) -> None:
    message = text_message("once")
    first = (await rpc(http, "SendMessage", {"message": message}))["result"]["task"]
    again = (await rpc(http, "SendMessage", {"message": message}))["result"]["task"]
    assert again["id"] == first["id"] and again["status"]["state"] == "TASK_STATE_COMPLETED"
    assert desk_bus[1].runs["once"] == 1


async def test_an_agent_asks_for_input_and_the_next_message_continues_the_task(
    http: httpx.AsyncClient,
) -> None:
    client = await a2a_client(http, "desk", streaming=False)
    (first,) = await send(client, user_message(new_text_part("book")))
    task = first.task
    assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
    assert "Which city?" in task.status.message.parts[0].text
    follow = user_message(new_text_part("Paris"), context_id=task.context_id)
    follow.task_id = task.id
    (second,) = await send(client, follow)
    assert second.task.id == task.id
    assert second.task.status.state == pb.TASK_STATE_COMPLETED
    assert get_artifact_text(second.task.artifacts[-1]) == "booked Paris"
    assert len(second.task.history) == 2
    again = text_message("more", taskId=task.id, contextId=task.context_id)
    refused = await rpc(http, "SendMessage", {"message": again})
    assert refused["error"]["code"] == -32004  # a completed task takes no more messages


# -- subscribe, cancel, progress, inactivity ---------------------------------------------


async def sse(http: httpx.AsyncClient, method_name: str, params: Any, **headers: str) -> list[Any]:
    """The (id, result) of each event of an SSE answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method_name, "params": params}
    response = await within(
        http.post(
            "/a2a/desk",
            content=orjson.dumps(body),
            headers={"accept": "text/event-stream", **headers},
        )
    )
    events, event_id = [], None
    for line in response.text.splitlines():
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            events.append((event_id, orjson.loads(line[6:])["result"]))
    return events


async def test_subscribe_gets_the_task_then_the_rest_and_resumes_without_repeats(
    http: httpx.AsyncClient,
) -> None:
    task = await start(http, call_message("work", beats=6, beat=0.05))
    events = await sse(http, "SubscribeToTask", {"id": task["id"]})
    assert "task" in events[0][1]
    assert events[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    versions = [v for v, _ in events[1:]]
    assert versions == sorted(set(versions))  # each update once, in order
    # Resuming after an update gets exactly the ones after it.
    middle = versions[len(versions) // 2]
    resumed = await sse(
        http, "SubscribeToTask", {"id": task["id"]}, **{"last-event-id": str(middle)}
    )
    assert [v for v, _ in resumed] == [v for v in versions if v > middle]
    # Without a resume point a finished task has nothing more to stream.
    ended = await rpc(http, "SubscribeToTask", {"id": task["id"]})
    assert ended["error"]["code"] == -32004


async def test_a_resume_point_the_task_never_reached_gets_the_task_as_it_is(
    http: httpx.AsyncClient,
) -> None:
    """A Last-Event-ID past the task's latest update is no point to resume from: the
    client gets the task, then its updates to the end (not a silent, empty stream)."""
    task = await start(http, call_message("work", beats=6, beat=0.05))
    events = await sse(http, "SubscribeToTask", {"id": task["id"]}, **{"last-event-id": "1000"})
    assert "task" in events[0][1]
    assert events[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("value", ["\u00b2".encode("latin-1"), b"9" * 5000, b"soon"])
async def test_a_last_event_id_that_is_no_number_is_ignored(
    http: httpx.AsyncClient, value: bytes
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    body["params"] = {"message": text_message("hello")}
    headers = {b"last-event-id": value}  # ('²' passes str.isdigit; int() refuses it)
    response = await within(http.post("/a2a/desk", content=orjson.dumps(body), headers=headers))
    assert response.status_code == 200, response.text
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_progress_keeps_a_long_task_alive_and_cancel_reaches_a_plain_handler(
    http: httpx.AsyncClient, desk_bus: tuple[Bus, Desk]
) -> None:
    beats = int(4 * INACTIVITY / 0.05)  # runs well past the inactivity limit
    task = await start(http, call_message("work", beats=beats, beat=0.05))
    await asyncio.sleep(2 * INACTIVITY)
    running = (await rpc(http, "GetTask", {"id": task["id"]}))["result"]
    assert running["status"]["state"] == "TASK_STATE_WORKING"
    assert running["status"]["message"]["parts"][0]["text"].startswith("beat ")
    canceled = (await rpc(http, "CancelTask", {"id": task["id"]}))["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    await eventually(desk_bus[1].stopped.is_set, "the handler to see self.cancelled")
    again = await rpc(http, "CancelTask", {"id": task["id"]})
    assert again["error"]["code"] == -32002  # not cancelable: it has ended


async def test_a_silent_agent_fails_its_task_after_the_inactivity_limit(
    http: httpx.AsyncClient,
) -> None:
    task = await start(http, call_message("silent", seconds=4 * INACTIVITY))
    failed = await within(settled(http, task["id"]))
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    text = failed["status"]["message"]["parts"][0]["text"]
    assert "inactivity limit" in text and "Timeout" in text


# -- push notifications ------------------------------------------------------------------


async def test_status_changes_are_pushed_with_retries_and_one_delivery_id(
    http: httpx.AsyncClient,
    receiver: Receiver,  # noqa: F811
) -> None:
    receiver.statuses = [500]  # the first POST fails: it is retried
    push = {"url": receiver.url, "token": "tok-1"}
    task = await start(
        http, call_message("work", beats=3, beat=0.05), taskPushNotificationConfig=push
    )
    await within(settled(http, task["id"]))
    await eventually(
        lambda: any(
            p.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
            for p in receiver.handled.values()
        ),
        "the final status to be pushed",
    )
    ids = receiver.header("x-a2a-delivery-id")
    assert ids[0] == ids[1]  # the retry of the 500 carries the same delivery id
    assert set(receiver.header("x-a2a-notification-token")) == {"tok-1"}
    states = [p["statusUpdate"]["status"]["state"] for p in receiver.handled.values()]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED"
    listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [c["url"] for c in listed["result"]["configs"]] == [receiver.url]
    deleted = await rpc(
        http, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}
    )
    assert deleted["result"] is None
    gone = await rpc(
        http, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": task["id"]}
    )
    assert gone["error"]["code"] == -32001


async def test_a_follow_up_message_registers_its_webhook_or_is_refused(
    http: httpx.AsyncClient,
    receiver: Receiver,  # noqa: F811
) -> None:
    task = await within(settled(http, (await start(http, text_message("book")))["id"]))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow = text_message("Oslo", taskId=task["id"], contextId=task["contextId"])
    bad = {"url": "file:///etc/passwd"}
    params = {"message": follow, "configuration": {"taskPushNotificationConfig": bad}}
    refused = await rpc(http, "SendMessage", params)
    assert refused["error"]["code"] == -32602
    assert "push notification URL refused" in refused["error"]["message"]
    still = (await rpc(http, "GetTask", {"id": task["id"]}))["result"]
    assert still["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the turn was not taken

    params["configuration"] = {"taskPushNotificationConfig": {"url": receiver.url, "id": "w"}}
    answered = (await rpc(http, "SendMessage", params))["result"]["task"]
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [(c["id"], c["url"]) for c in listed["result"]["configs"]] == [("w", receiver.url)]


async def test_a_webhook_on_a_loopback_address_is_refused_unless_allowed(
    desk_bus: tuple[Bus, Desk],
) -> None:
    app = create_app(desk_bus[0], GatewaySettings(request_timeout=WAIT))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=WAIT
    ) as strict:
        task = await start(strict, text_message("hello"))
        params = {"taskId": task["id"], "url": "http://127.0.0.1:9/hook"}
        refused = await rpc(strict, "CreateTaskPushNotificationConfig", params)
        assert refused["error"]["code"] == -32602
        assert "loopback" in refused["error"]["message"]


async def test_a_blocking_send_answers_a_long_task_as_it_is_after_its_wait(
    desk_bus: tuple[Bus, Desk],
) -> None:
    app = create_app(desk_bus[0], settings(a2a_blocking_wait=0.2))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=WAIT
    ) as short:
        params = {"message": call_message("work", beats=40, beat=0.05)}
        task = (await rpc(short, "SendMessage", params))["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        done = await within(settled(short, task["id"]))
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_message_to_a_working_task_supersedes_its_turn(
    http: httpx.AsyncClient, desk_bus: tuple[Bus, Desk]
) -> None:
    desk = desk_bus[1]
    task = await start(http, call_message("work", beats=400, beat=0.02))
    while (await rpc(http, "GetTask", {"id": task["id"]}))["result"]["status"]["state"] != (
        "TASK_STATE_WORKING"
    ):
        await asyncio.sleep(0.02)
    follow = text_message("hello", taskId=task["id"], contextId=task["contextId"])
    result = (await rpc(http, "SendMessage", {"message": follow}))["result"]["task"]
    assert result["id"] == task["id"] and result["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result["artifacts"][-1]["parts"] == [{"text": "noted hello"}]
    assert len(result["history"]) == 2
    await eventually(desk.stopped.is_set, "the superseded handler to be told to stop")


async def test_params_may_name_fields_as_the_proto_file_does(http: httpx.AsyncClient) -> None:
    """ProtoJSON parsers take ``task_id`` as well as ``taskId``: so does the endpoint
    (for the envelope's fields, never for the caller's data)."""
    message = {"message_id": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "x"}]}
    task = (await rpc(http, "SendMessage", {"message": message}))["result"]["task"]
    listed = await rpc(http, "ListTasks", {"page_size": 1, "include_artifacts": True})
    assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
    assert listed["result"]["pageSize"] == 1 and "artifacts" in listed["result"]["tasks"][0]
    got = await rpc(http, "GetTask", {"id": task["id"], "history_length": 0})
    assert "history" not in got["result"]


async def test_a_task_keeps_at_most_ten_webhooks_and_an_id_set_again_replaces_one(
    http: httpx.AsyncClient,
    receiver: Receiver,  # noqa: F811
) -> None:
    task = await start(http, text_message("hooks"))

    async def create(config_id: str, path: str) -> Any:
        params = {"taskId": task["id"], "id": config_id, "url": f"{receiver.url}/{path}"}
        return await rpc(http, "CreateTaskPushNotificationConfig", params)

    for i in range(10):
        assert (await create(f"c{i}", "first"))["result"]["id"] == f"c{i}"
    replaced = await create("c0", "again")  # the same id: replaced, not an eleventh
    assert replaced["result"]["url"].endswith("/again")
    refused = await create("c10", "one-too-many")
    assert (
        refused["error"]["code"] == -32602 and "the most it may have" in refused["error"]["message"]
    )
    listed = await rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [c["id"] for c in listed["result"]["configs"]] == [f"c{i}" for i in range(10)]
    gone = {"taskId": task["id"], "id": "never-set"}
    assert (await rpc(http, "DeleteTaskPushNotificationConfig", gone))["result"] is None
    assert (await rpc(http, "GetTaskPushNotificationConfig", gone))["error"]["code"] == -32001
