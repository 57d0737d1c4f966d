"""What one chunk of an in-memory stream costs, counted rather than timed.

A stream's rate on the in-memory bus (``a2a-bus bench streams``) is set by the
Python work each chunk takes: built as a response event on the agent's side,
published to the caller's reply topic, delivered to its subscription, checked
in ``seq`` order and handed to the reader, with a credit taken by the actor and
given back. That work is counted here with ``sys.setprofile`` in every thread,
as tests/bus/test_request_cost.py counts a request's: calls of the project's
own functions per chunk (a coroutine's resumptions count as calls too), and
calls of any Python code at all (the standard library's locks, events and
queues are Python code: one more of those per chunk is a step too). The counts
do not depend on the machine's speed or load; the budgets leave some room. A
change that adds steps to every chunk's path fails here, and should either be
worth it (raise the budget, say why) or be done off that path.
"""

from __future__ import annotations

from collections.abc import Iterator

from a2a_bus import Agent, Bus, method
from tests.call_counts import count_calls

#: Calls of a2a_bus functions per chunk: 36 when the budget was set, down from 41.
PROJECT_CALLS_PER_CHUNK = 40
#: Calls of any Python function per chunk (the test's generator aside): 41 when
#: the budget was set, down from 89 (a Python semaphore, queue and event per chunk).
CALLS_PER_CHUNK = 48
#: Chunks per stream: long streams, so that what each stream costs once (the
#: request, the end) and each wake-up of the loop (one per burst of chunks) weigh
#: little on the figure.
CHUNKS = 1000
STREAMS = 3


class Lines(Agent):
    agent_id = "cost-lines"

    @method
    def lines(self, count: int) -> Iterator[str]:
        for _ in range(count):
            yield "x" * 100


async def _streams(bus: Bus, count: int) -> None:
    client = bus.async_client()
    for _ in range(count):
        received = 0
        async for _ in client.stream("cost-lines", "lines", [CHUNKS]):
            received += 1
        assert received == CHUNKS


def test_a_chunk_of_an_in_memory_stream_stays_within_its_budget_of_calls() -> None:
    calls = count_calls(Lines, _streams, 1, STREAMS, besides=__file__)
    chunks = STREAMS * CHUNKS
    per_chunk = sum(calls.project.values()) / chunks
    top = ", ".join(f"{name} {count / chunks:g}" for name, count in calls.project.most_common(8))
    # The count saw every chunk on the loop and in the actor's thread.
    assert calls.project["emit"] == calls.project["accept"] == chunks
    assert per_chunk <= PROJECT_CALLS_PER_CHUNK, f"{per_chunk:.1f} calls per chunk: {top}"
    all_per_chunk = calls.all / chunks
    assert all_per_chunk <= CALLS_PER_CHUNK, f"{all_per_chunk:.1f} Python calls per chunk"
