"""The names of consumer groups: an inbox group is named after its set of topics."""

from __future__ import annotations

from a2a_bus.transport.kafka.groups import composition_group, is_composition_group


def test_an_inbox_group_is_named_after_its_set_of_topics() -> None:
    group = composition_group("a2a.inbox", ["a2a.agent.b", "a2a.agent.a"])
    assert group == composition_group("a2a.inbox", ["a2a.agent.a", "a2a.agent.b"])
    assert group != composition_group("a2a.inbox", ["a2a.agent.a"])
    assert is_composition_group("a2a.inbox", group)
    assert not is_composition_group("a2a.inbox", "a2a.inbox.other")
    assert not is_composition_group("a2a.inbox", group.replace("a2a.inbox", "a2a.inboxes"))
