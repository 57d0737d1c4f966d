"""Caller -> agent streams that stay open while other work reaches the same replica.

A handler reading a caller's stream gives its actor back while it waits for the
next chunk, so other messages are handled meanwhile and the stream's chunks are
never stuck behind work that waits for the stream to end. Both transports.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import ClassVar

import pytest

from a2a_bus import Agent, AsyncClient, Bus, JsonRpcError, method
from a2a_bus.hosting.inbound import InboundStreams
from a2a_bus.protocol import ErrorCode
from a2a_bus.transport.dead_letters import DLQ_REASON
from tests.buses import WAIT, eventually, header, make_bus, read_dlq

__all__ = ["make_bus"]  # the fixture, shared with the behavioural suite

MakeBus = Callable[..., Awaitable[Bus]]


class Tally(Agent):
    agent_id = "tally"
    mailbox_size = 8
    max_open_streams = 4
    #: Sessions whose handler started reading, per test token.
    reading: ClassVar[dict[str, int]] = {}
    #: How ``watch`` ended, per test token: the sum or the error.
    ended: ClassVar[dict[str, int | JsonRpcError]] = {}

    def __init__(self) -> None:
        self.bumps = 0

    @method
    def total(self, numbers: Iterator[int], token: str = "") -> int:
        self.reading[token] = self.reading.get(token, 0) + 1
        return sum(numbers)

    @method
    def watch(self, numbers: Iterator[int], token: str) -> int:
        """The sum; records how reading the stream ended."""
        self.reading[token] = self.reading.get(token, 0) + 1
        try:
            total = sum(numbers)
        except JsonRpcError as exc:
            self.ended[token] = exc
            raise
        self.ended[token] = total
        return total

    @method
    def head(self, numbers: Iterator[int]) -> int:
        """The first item; the rest is left unread."""
        return next(numbers)

    @method
    def doubled(self, numbers: Iterator[int]) -> Iterator[int]:
        """A stream in, a stream out."""
        for n in numbers:
            yield 2 * n

    @method
    def bump(self) -> int:
        self.bumps += 1
        return self.bumps

    @method
    def explode(self) -> None:
        raise RuntimeError("boom")


async def _paced(items: list[int], gate: asyncio.Event) -> AsyncIterator[int]:
    """The first item at once, the rest once ``gate`` is set."""
    yield items[0]
    await gate.wait()
    for item in items[1:]:
        yield item


async def _open_stream(
    client: AsyncClient, items: list[int]
) -> tuple[asyncio.Future[int], asyncio.Event]:
    """A ``stream_to`` whose handler has read the first item and waits for the
    rest, which are sent once the returned gate is set."""
    gate = asyncio.Event()
    token = uuid.uuid4().hex
    streaming = asyncio.ensure_future(
        client.stream_to("tally", "total", _paced(items, gate), {"token": token})
    )
    await eventually(lambda: Tally.reading.get(token) == 1)
    return streaming, gate


async def test_requests_are_answered_while_a_stream_waits_for_chunks(make_bus: MakeBus) -> None:
    # More requests than the mailbox and the subscription's in-flight bound hold:
    # queued behind a handler that waits for chunks, they would hold every slot
    # the stream's next chunk needs.
    bus = await make_bus(Tally)
    client = bus.async_client()
    streaming, gate = await _open_stream(client, [1, 2, 3, 4])
    answers = await asyncio.wait_for(
        asyncio.gather(*(client.request("tally", "bump") for _ in range(30))), WAIT
    )
    assert sorted(answers) == list(range(1, 31))
    assert not streaming.done()
    gate.set()
    assert await asyncio.wait_for(streaming, WAIT) == 10


async def test_more_streams_than_the_mailbox_holds_are_all_answered(make_bus: MakeBus) -> None:
    bus = await make_bus(Tally)
    client = bus.async_client()
    token = uuid.uuid4().hex
    count = 3 * Tally.mailbox_size
    gates = [asyncio.Event() for _ in range(count)]
    calls = [
        asyncio.ensure_future(
            client.stream_to("tally", "total", _paced([n, n, n], gates[n]), {"token": token})
        )
        for n in range(count)
    ]
    await asyncio.sleep(0.2)  # every stream has sent its first chunk
    for gate in gates:
        gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), WAIT)
    busy = [o for o in outcomes if isinstance(o, JsonRpcError)]
    assert all(e.code == ErrorCode.BUSY for e in busy), outcomes
    assert all("open streams" in str(e.data) for e in busy)
    answered = {n: o for n, o in enumerate(outcomes) if not isinstance(o, BaseException)}
    assert answered == {n: 3 * n for n in answered}
    assert len(answered) >= Tally.max_open_streams
    # Nothing is held once they are answered: the next stream is taken.
    assert await asyncio.wait_for(client.stream_to("tally", "total", [5, 6]), WAIT) == 11


async def test_stop_ends_an_open_stream_at_once(make_bus: MakeBus) -> None:
    bus = await make_bus(Tally)
    client = bus.async_client()
    streaming, _ = await _open_stream(client, [1, 2])
    # Without an end the handler would wait out its 60 s idle time, and stop with it.
    await asyncio.wait_for(bus.astop(), WAIT)
    streaming.cancel()
    with pytest.raises((asyncio.CancelledError, JsonRpcError)):
        await streaming


async def test_a_crash_elsewhere_ends_an_open_stream_it_read_from(make_bus: MakeBus) -> None:
    bus = await make_bus(Tally)
    client = bus.async_client()
    streaming, gate = await _open_stream(client, [1, 2])
    with pytest.raises(JsonRpcError):
        await asyncio.wait_for(client.request("tally", "explode"), WAIT)
    gate.set()
    # The restarted agent cannot read the stream from its start: the caller is told.
    with pytest.raises(JsonRpcError) as error:
        await asyncio.wait_for(streaming, WAIT)
    assert error.value.code == ErrorCode.INTERNAL_ERROR
    letters = await read_dlq(bus, 2)
    reasons = [header(letter, DLQ_REASON) for letter in letters]
    assert any("the agent restarted while this stream was open" in r for r in reasons), reasons
    assert await asyncio.wait_for(client.stream_to("tally", "total", [5, 6]), WAIT) == 11


async def _failing_source(error: BaseException) -> AsyncIterator[int]:
    yield 1
    yield 2
    raise error


async def _stalled_source() -> AsyncIterator[int]:
    yield 1
    await asyncio.Event().wait()  # never set: only a cancel ends it
    yield 2


async def _handler_ending(token: str) -> JsonRpcError:
    await eventually(lambda: token in Tally.ended)
    ended = Tally.ended[token]
    assert isinstance(ended, JsonRpcError), ended
    return ended


async def test_a_source_that_fails_ends_the_handlers_stream_at_once(make_bus: MakeBus) -> None:
    bus = await make_bus(Tally)
    token = uuid.uuid4().hex
    source = _failing_source(ValueError("the source broke"))
    with pytest.raises(ValueError, match="the source broke"):
        await asyncio.wait_for(
            bus.async_client().stream_to("tally", "watch", source, {"token": token}), WAIT
        )
    # Not after the handler's 60 s idle time: the caller told it the stream is over.
    ended = await _handler_ending(token)
    assert ended.code == ErrorCode.STREAM_BROKEN
    assert ended.data == "the caller abandoned the stream after 2 chunks"


async def test_a_cancelled_caller_ends_the_handlers_stream(make_bus: MakeBus) -> None:
    bus = await make_bus(Tally)
    token = uuid.uuid4().hex
    sending = asyncio.ensure_future(
        bus.async_client().stream_to("tally", "watch", _stalled_source(), {"token": token})
    )
    await eventually(lambda: Tally.reading.get(token) == 1)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    ended = await _handler_ending(token)
    assert ended.data == "the caller abandoned the stream after 1 chunks"


async def test_a_stream_whose_end_never_comes_is_forgotten(
    make_bus: MakeBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(InboundStreams, "linger", 0.05)
    bus = await make_bus(Tally)
    [host] = bus.hosts
    session = uuid.uuid4().hex
    chunk = {"_sessionId": session, "_seq": 0, "chunk": 5}
    await asyncio.wait_for(bus.async_client().notify("tally", "head", chunk), WAIT)
    await eventually(lambda: session in host.inbound)
    # The handler answered after one chunk; the caller died before sending the end.
    await eventually(lambda: session not in host.inbound)


async def test_an_answered_stream_is_not_kept(make_bus: MakeBus) -> None:
    # Only a stream whose end never came lingers; one answered is let go at once.
    bus = await make_bus(Tally)
    [host] = bus.hosts
    client = bus.async_client()
    streaming, gate = await _open_stream(client, [1, 2, 3])
    [(stream, _, _)] = list(host.inbound._sessions.values())
    alive = weakref.ref(stream)
    del stream
    gate.set()
    assert await asyncio.wait_for(streaming, WAIT) == 6
    # The actor thread holds the last message it handled until the next one.
    assert await asyncio.wait_for(client.request("tally", "bump"), WAIT) == 1

    def released() -> bool:
        gc.collect()
        return alive() is None

    await eventually(released)
    assert host.inbound._forget == {}


async def test_a_part_sent_again_after_its_stream_ended_starts_nothing(
    make_bus: MakeBus,
) -> None:
    """A chunk or end sent again once the stream was answered (a client retrying its
    POST) used to start the handler anew on it: a second run on what came again, its
    end answered with that run's result, or the run left waiting for its idle time."""
    bus = await make_bus(Tally)
    client = bus.async_client()
    token = uuid.uuid4().hex
    base = {"_sessionId": uuid.uuid4().hex, "token": token}
    chunk, end = {**base, "_seq": 0, "chunk": 5}, {**base, "_seq": 1, "_end": True}
    await asyncio.wait_for(client.notify("tally", "total", chunk), WAIT)
    assert await asyncio.wait_for(client.request("tally", "total", end), WAIT) == 5
    await asyncio.wait_for(client.notify("tally", "total", chunk), WAIT)
    with pytest.raises(JsonRpcError) as refused:
        await asyncio.wait_for(client.request("tally", "total", end), WAIT)
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert "is over" in str(refused.value.data)
    assert Tally.reading[token] == 1
    [host] = bus.hosts
    assert base["_sessionId"] not in host.inbound


async def test_a_stream_refused_as_busy_may_be_sent_again_under_its_session_id(
    make_bus: MakeBus,
) -> None:
    # Its handler never ran: sending it again is what the refusal asks for.
    bus = await make_bus(Tally)
    client = bus.async_client()
    held = [await _open_stream(client, [1, 2]) for _ in range(Tally.max_open_streams)]
    base = {"_sessionId": uuid.uuid4().hex}
    chunk, end = {**base, "_seq": 0, "chunk": 7}, {**base, "_seq": 1, "_end": True}
    await asyncio.wait_for(client.notify("tally", "total", chunk), WAIT)
    with pytest.raises(JsonRpcError) as busy:
        await asyncio.wait_for(client.request("tally", "total", end), WAIT)
    assert busy.value.code == ErrorCode.BUSY
    for streaming, gate in held:
        gate.set()
        assert await asyncio.wait_for(streaming, WAIT) == 3
    await asyncio.wait_for(client.notify("tally", "total", chunk), WAIT)
    assert await asyncio.wait_for(client.request("tally", "total", end), WAIT) == 7


async def test_streams_of_two_methods_under_one_session_id_are_two_streams(
    make_bus: MakeBus,
) -> None:
    """The second method's chunks went to the first one's handler (as repeats of its
    seqs, dropped), and its end found a stream of nothing but a gap."""
    bus = await make_bus(Tally)
    client = bus.async_client()
    token = uuid.uuid4().hex
    base = {"_sessionId": uuid.uuid4().hex, "token": token}
    for seq, (one, other) in enumerate([(2, 5), (3, 7)]):
        await client.notify("tally", "total", {**base, "_seq": seq, "chunk": one})
        await client.notify("tally", "watch", {**base, "_seq": seq, "chunk": other})
    end = {**base, "_seq": 2, "_end": True}
    answers = [client.request("tally", method, end) for method in ("total", "watch")]
    assert await asyncio.wait_for(asyncio.gather(*answers), WAIT) == [5, 12]


async def test_a_generator_reading_a_stream_answers_with_its_items(make_bus: MakeBus) -> None:
    # As request() on a streaming method: the items gathered into one list.
    bus = await make_bus(Tally)
    result = await asyncio.wait_for(
        bus.async_client().stream_to("tally", "doubled", range(5)), WAIT
    )
    assert result == [0, 2, 4, 6, 8]


async def test_streams_from_another_node_meet_requests_on_the_way(make_bus: MakeBus) -> None:
    # The answers go back over the caller node's reply topic, not the local shortcut.
    hosting = await make_bus(Tally)
    calling = await make_bus(peer=hosting)
    client = calling.async_client()
    streaming, gate = await _open_stream(client, [1, 2, 3])
    others = [client.stream_to("tally", "total", range(n, n + 20)) for n in range(3)]
    bumps = [client.request("tally", "bump") for _ in range(20)]
    answers = await asyncio.wait_for(asyncio.gather(*others, *bumps), WAIT)
    assert answers[:3] == [sum(range(n, n + 20)) for n in range(3)]
    assert sorted(answers[3:]) == list(range(1, 21))
    assert not streaming.done()  # still open: the rest were served meanwhile
    gate.set()
    assert await asyncio.wait_for(streaming, WAIT) == 6


def test_the_sync_client_reads_a_chunk_source_in_the_callers_thread() -> None:
    """A source that calls the bus (or blocks) runs where the caller does, not on the
    bus loop, which it would refuse (or stall for everyone)."""
    with Bus.memory(heartbeat=60.0, request_timeout=WAIT) as bus:
        bus.spawn(Tally)
        client = bus.client()

        def bumps() -> Iterator[int]:
            for _ in range(3):
                yield client.request("tally", "bump")

        assert client.stream_to("tally", "total", bumps()) == 1 + 2 + 3
