"""Memory strategies (pruning rules) and every strategy on every store through the loop."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from a2a_bus import Bus, JsonRpcError
from a2a_bus.llm import (
    AgentBuilder,
    AgentLoop,
    LlmMessage,
    OpenAIClient,
    ToolCall,
    llm_agent_class,
)
from a2a_bus.llm.memory import (
    SUMMARY_NAME,
    HeuristicTokenEstimator,
    InMemoryNotes,
    InMemoryStore,
    MemoryStrategy,
    NotesBackend,
    RedisStore,
    SlidingWindowMemory,
    SqliteNotes,
    SqliteStore,
    custom,
    full,
    llm_summarizer,
    open_store,
    sliding_window,
    summary,
    token_budget,
)

from .conftest import Completion, ScriptedOpenAI, StoreFactory

pytestmark = pytest.mark.timeout(60)

U, A, S = LlmMessage.user, LlmMessage.assistant, LlmMessage.system


def tool_round(call_id: str, *results: str) -> list[LlmMessage]:
    calls = tuple(ToolCall(f"{call_id}-{i}", "t", "{}") for i in range(len(results)))
    return [
        A(None, calls),
        *(LlmMessage.tool(c.id, r) for c, r in zip(calls, results, strict=True)),
    ]


def assert_consistent(messages: Sequence[LlmMessage]) -> None:
    """Every tool message follows the assistant message that called it."""
    open_ids: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            open_ids = {c.id for c in message.tool_calls}
        elif message.role == "tool":
            assert message.tool_call_id in open_ids, f"orphan tool message {message}"
        else:
            open_ids = set()


# -- strategies in isolation -----------------------------------------------------


def test_sliding_window_keeps_system_messages_and_the_last_n() -> None:
    memory = sliding_window(3).create([S("rules"), U("1"), A("2"), U("3"), A("4")])
    assert [m.content for m in memory.messages()] == ["rules", "2", "3", "4"]
    memory.add(U("5"))
    assert [m.content for m in memory.messages()] == ["rules", "3", "4", "5"]


def test_window_never_splits_a_tool_round() -> None:
    # The last 2 messages would start inside the round: the whole round is kept.
    history = [U("q"), *tool_round("r1", "a", "b", "c")]
    memory = sliding_window(2).create(history)
    assert [m.role for m in memory.messages()] == ["assistant", "tool", "tool", "tool"]
    memory.add(A("answer"), U("next"), *tool_round("r2", "x"))
    kept = memory.messages()
    assert_consistent(kept)
    assert [m.role for m in kept] == ["assistant", "tool"]


def test_orphan_tool_messages_are_dropped() -> None:
    memory = full().create([LlmMessage.tool("gone", "stale"), U("hi")])
    assert [m.content for m in memory.messages()] == ["stale", "hi"]  # full keeps all
    window = sliding_window(5).create([LlmMessage.tool("gone", "stale"), U("hi")])
    assert [m.content for m in window.messages()] == ["hi"]


def test_token_budget_prunes_oldest_rounds_until_it_fits() -> None:
    estimator = HeuristicTokenEstimator()
    history = [S("be brief"), U("a" * 40), *tool_round("r", "b" * 40), U("c" * 40), A("d" * 40)]
    memory = token_budget(40).create(history)
    kept = memory.messages()
    assert_consistent(kept)
    assert estimator.estimate(kept) <= 40
    assert kept[0].content == "be brief" and kept[-1].content == "d" * 40
    # The latest round is kept even alone over budget.
    tiny = token_budget(5).create([U("x" * 400)])
    assert len(tiny.messages()) == 1


def test_summary_folds_older_messages_and_updates_its_summary() -> None:
    seen: list[list[str | None]] = []

    def summarizer(messages: Sequence[LlmMessage]) -> str:
        seen.append([m.content for m in messages])
        return f"summary#{len(seen)}"

    memory = summary(2, summarizer).create([S("rules"), U("1"), A("2")])
    memory.add(U("3"))
    memory.add(A("4"))
    kept = memory.messages()
    assert [m.content for m in kept] == [
        "rules",
        "Summary of the earlier conversation: summary#2",
        "3",
        "4",
    ]
    assert kept[1].name == SUMMARY_NAME
    # The second fold saw the first summary plus the newly dropped message.
    assert seen == [["1"], ["Summary of the earlier conversation: summary#1", "2"]]


def test_summary_without_summarizer_degrades_to_a_window() -> None:
    memory = summary(2).create([U("1"), A("2"), U("3")])
    assert [m.content for m in memory.messages()] == ["2", "3"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: sliding_window(0),
        lambda: token_budget(-1),
        lambda: summary(0),
        lambda: SlidingWindowMemory([], 0),
    ],
)
def test_sizes_must_be_positive(make: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match=">= 1"):
        make()


def test_in_memory_store_is_lru_bounded() -> None:
    store = InMemoryStore(max_conversations=2)
    store.save("a", [U("1")])
    store.save("b", [U("2")])
    assert store.load("a")  # touch a: b is now the least recently used
    store.save("c", [U("3")])
    assert sorted(store.keys()) == ["a", "c"] and store.load("b") == []


def test_open_store_rejects_unknown_urls(tmp_path: Path) -> None:
    assert isinstance(open_store("memory://"), InMemoryStore)
    store = open_store(f"sqlite:///{tmp_path}/x.db")
    store.save("k", [U("persisted")])
    assert open_store(f"sqlite:///{tmp_path}/x.db").load("k")[0].content == "persisted"
    with pytest.raises(ValueError, match="unsupported store URL"):
        open_store("mongodb://nope")


# -- every strategy on every store, through the loop ---------------------------------


def answer_by_request(body: dict[str, Any]) -> Completion:
    messages = body["messages"]
    if messages[0]["content"].startswith("Summarize the conversation"):
        return Completion("SUMMARY of " + str(messages[-1]["content"].count("\n") + 1) + " lines")
    return Completion(f"answer to {messages[-1]['content']}")


STRATEGIES: dict[str, Callable[[OpenAIClient], MemoryStrategy]] = {
    "full": lambda client: full(),
    "sliding_window": lambda client: sliding_window(3),
    "token_budget": lambda client: token_budget(30),
    "summary": lambda client: summary(3, llm_summarizer(client)),
    "custom": lambda client: custom(lambda messages: SlidingWindowMemory(messages, 2)),
}


def chat_requests(server: ScriptedOpenAI) -> list[list[dict[str, Any]]]:
    return [
        r["messages"]
        for r in server.requests
        if not r["messages"][0]["content"].startswith("Summarize the conversation")
    ]


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_strategy_on_store(
    llm_server: ScriptedOpenAI,
    llm_client: OpenAIClient,
    store_factory: StoreFactory,
    strategy: str,
) -> None:
    for _ in range(40):
        llm_server.respond_with(answer_by_request)
    memory = STRATEGIES[strategy](llm_client)

    def agent() -> AgentLoop:
        return AgentLoop(llm_client, memory=memory, store=store_factory())

    first = agent()
    for n in range(1, 4):
        assert first.run(f"question {n}", conversation="alice").content == f"answer to question {n}"
    restarted = agent()  # a fresh store object over the same data: a restart
    restarted.run("question 4", conversation="alice")
    restarted.run("hello from bob", conversation="bob")

    alice_last = [m["content"] for m in chat_requests(llm_server)[3]]
    bob_last = [m["content"] for m in chat_requests(llm_server)[4]]
    assert bob_last == ["hello from bob"]  # conversations are isolated
    assert alice_last[-1] == "question 4"
    if strategy == "full":
        assert alice_last == [
            "question 1",
            "answer to question 1",
            "question 2",
            "answer to question 2",
            "question 3",
            "answer to question 3",
            "question 4",
        ]
    elif strategy == "sliding_window":
        assert alice_last == ["question 3", "answer to question 3", "question 4"]
    elif strategy == "token_budget":
        # 7 + 9 + 7 estimated tokens fit in 30; one more answer (9) would not.
        sent = [LlmMessage.from_dict(m) for m in chat_requests(llm_server)[3]]
        assert HeuristicTokenEstimator().estimate(sent) <= 30
        assert alice_last == ["question 3", "answer to question 3", "question 4"]
    elif strategy == "summary":
        assert alice_last[0].startswith("Summary of the earlier conversation: SUMMARY of")
        assert chat_requests(llm_server)[3][0]["name"] == SUMMARY_NAME
        assert alice_last[1:] == ["question 3", "answer to question 3", "question 4"]
    elif strategy == "custom":
        assert alice_last == ["answer to question 3", "question 4"]
    stored = store_factory().load("alice")
    assert stored[-1].content == "answer to question 4"
    assert set(store_factory().keys()) >= {"alice", "bob"}


# -- memory backends that expose tools -------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def notes(request: pytest.FixtureRequest, tmp_path: Path) -> NotesBackend:
    return InMemoryNotes() if request.param == "memory" else SqliteNotes(tmp_path / "notes.db")


def test_builder_merges_the_notes_tools(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient, notes: NotesBackend
) -> None:
    agent = AgentBuilder("notary").llm(llm_client).memory_backend(notes).build()
    assert agent.tools.names() == ["memory_save", "memory_read", "memory_list", "memory_delete"]
    llm_server.call_tools(("memory_save", {"key": "colour", "value": "teal"}))
    llm_server.call_tools(("memory_read", {"key": "colour"}), ("memory_list", {}))
    llm_server.reply("your colour is teal")
    llm_server.call_tools(("memory_read", {"key": "colour"}))
    llm_server.reply("I do not know")
    agent.run("remember teal", conversation="c1")
    agent.run("what colour?", conversation="c2")  # another conversation: another scope
    contents = [m["content"] for m in llm_server.requests[2]["messages"] if m["role"] == "tool"]
    assert contents == ["saved note 'colour'", "teal", '["colour"]']
    other = [m["content"] for m in llm_server.requests[4]["messages"] if m["role"] == "tool"]
    assert other == ["error: tool 'memory_read' failed: LookupError: no note named 'colour'"]
    assert notes.read("notary/c1", "colour") == "teal"


# -- stores that cannot be used ----------------------------------------------------------


def _answers(bus: Bus, requests: list[tuple[str, dict[str, Any]]]) -> list[JsonRpcError]:
    """The errors ``requests`` to the agent "helper" are answered with (each must fail)."""
    errors = []
    for method, params in requests:
        with pytest.raises(JsonRpcError) as refused:
            bus.client().request("helper", method, params, timeout=30)
        errors.append(refused.value)
    return errors


def test_an_agent_whose_redis_store_is_out_of_reach_answers_naming_it_once_logged(
    llm_server: ScriptedOpenAI, llm_client: OpenAIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a crash of the agent (retried, then -32603 with no reason, and a traceback
    logged at every try): -32603 whose data names the store, without its password,
    and one warning for the outage."""
    store = RedisStore("redis://:hunter2pw@127.0.0.1:1/0")  # nothing listens on port 1
    agent = AgentBuilder("helper").llm(llm_client).store(store).build()
    chat = ("chat", {"message": "hi", "session_id": "s"})
    with caplog.at_level(logging.INFO), Bus.memory() as bus:
        bus.spawn(llm_agent_class(agent, "helper"))
        errors = _answers(bus, [chat, chat, ("reset", {"session_id": "s"})])
    for error in errors:
        assert (error.code, error.message) == (-32603, "Internal error")
        assert error.data.startswith(
            "conversation store RedisStore('redis://127.0.0.1:1/0', prefix='a2a:conversation:'): "
            "load failed: ConnectionError: "
        ), error.data
    logged = [record for record in caplog.records if "127.0.0.1:1" in record.getMessage()]
    assert [record.levelname for record in logged] == ["WARNING"], logged
    assert "hunter2pw" not in caplog.text + repr(store)
    assert llm_server.requests == []  # the model is not asked what could not be kept


def test_an_agent_whose_sqlite_store_stays_locked_answers_naming_it(
    tmp_path: Path, llm_server: ScriptedOpenAI, llm_client: OpenAIClient
) -> None:
    """Another process holding the database past the store's busy wait (5 s)."""
    path = tmp_path / "conversations.db"
    agent = AgentBuilder("helper").llm(llm_client).store(SqliteStore(path)).build()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with Bus.memory() as bus:
            bus.spawn(llm_agent_class(agent, "helper"))
            llm_server.reply("hello")
            [error] = _answers(bus, [("chat", {"message": "hi", "session_id": "s"})])
    finally:
        holder.close()
    assert error.code == -32603
    assert error.data == (
        f"conversation store SqliteStore({str(path)!r}): save failed: "
        "OperationalError: database is locked"
    )


def test_a_sqlite_store_whose_file_cannot_be_made_is_refused_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"  # where the store's directory would have to be
    blocker.write_text("")
    path = blocker / "conversations.db"
    for make in (lambda: SqliteStore(path), lambda: AgentBuilder().store(f"sqlite:///{path}")):
        with pytest.raises(JsonRpcError) as refused:
            make()
        assert refused.value.data.startswith(
            f"conversation store SqliteStore({str(path)!r}): open failed: FileExistsError: "
        ), refused.value.data  # a-file exists, not as a directory
