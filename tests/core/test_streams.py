"""Agent -> caller chunks (core/streams.py): each chunk of a stream is a response
event of its own, made from attributes built once for the stream."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from a2a_bus.core.streams import STREAM_CONTROL, ChunkEvents
from a2a_bus.protocol import Adaptor, classify_call, ext, record_key, result_response

_OWN = ("id", "time", ext.SEQ, ext.REPLY_TO, STREAM_CONTROL)


def test_each_chunk_is_a_response_event_of_its_own() -> None:
    """Every chunk carries what the response to its request would (its collaboration
    id, its trace, a task's id), its own id and, for a task's records, its own time;
    its ``seq``, the caller's reply topic and where a cancel goes; and the item as
    a JSON-RPC result. All share one record key."""
    adaptor = Adaptor()
    message = {"jsonrpc": "2.0", "method": "lines", "params": [3], "id": 7}
    request = adaptor.event_from_message(message, classify_call(message))
    request.get_attributes()[ext.TASK_ID] = "task-1"
    chunks = ChunkEvents(adaptor, request, "a2a.reply.caller", "a2a.reply.agent")
    first = chunks(0, "line 0")
    time.sleep(0.01)  # so that a time taken now is later than the first chunk's
    moment = datetime.now(UTC)
    second = chunks(1, {"line": 1})

    answer = adaptor.response_event(request, result_response({"line": 1}, 7)).get_attributes()
    attributes = second.get_attributes()
    assert {k: v for k, v in attributes.items() if k not in _OWN} == {
        k: v for k, v in answer.items() if k not in _OWN
    }
    assert attributes[ext.COLLABORATION] == request.get_id()
    assert attributes[ext.TASK_ID] == "task-1"
    assert (attributes[ext.SEQ], attributes[ext.REPLY_TO], attributes[STREAM_CONTROL]) == (
        1,
        "a2a.reply.caller",
        "a2a.reply.agent",
    )
    assert second.get_data() == {"jsonrpc": "2.0", "result": {"line": 1}, "id": 7}
    assert first.get_attributes()[ext.SEQ] == 0 and first.get_data()["result"] == "line 0"
    assert first.get_id() != second.get_id()
    assert first.get_attributes()["time"] < moment <= attributes["time"]
    assert record_key(first) == record_key(second) == chunks.key
