"""LLM agents woken by schedules through their triggers: an agent file's schedule
publishes on a subject the agent subscribes to; the scripted LLM server answers."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from a2a_bus import Agent, Bus, subscribe
from a2a_bus.llm import AgentFileError, agent_class_from_file

from .conftest import ScriptedOpenAI

WAIT = 30.0  # upper bound on any wait; never a performance assertion

AGENT_FILE = """\
id: reporter
model: file-model
subscribe: [reports.due]
output_topic: reports.done
schedules:
  daily-report:
    every: 0.3s
    publish: reports.due
    data: Write the daily report.
"""


def test_a_schedule_in_an_agent_file_wakes_the_agent_through_its_trigger(
    tmp_path: Path, llm_server: ScriptedOpenAI
) -> None:
    path = tmp_path / "reporter.agent.yaml"
    path.write_text(AGENT_FILE)
    cls = agent_class_from_file(path, client=llm_server.client())
    [schedule] = cls.schedules
    assert (schedule.name, schedule.every, schedule.publish) == ("daily-report", 0.3, "reports.due")
    for _ in range(50):
        llm_server.reply("Report: all quiet.")
    answers: list[Any] = []
    arrived = threading.Event()

    class Desk(Agent):
        agent_id = "desk"

        @subscribe("reports.done")
        def on_answer(self, event: Any) -> None:
            answers.append(event)
            arrived.set()

    with Bus.memory(prefix=f"t{uuid.uuid4().hex[:8]}", request_timeout=WAIT) as bus:
        bus.spawn(Desk)
        bus.spawn(cls, 2)  # two replicas, one scheduler: each tick wakes one of them once
        assert arrived.wait(WAIT)
    data = answers[0].get_data()
    assert data["answer"] == "Report: all quiet."
    assert data["trigger"]["id"].startswith("daily-report@")
    prompt = llm_server.requests[0]["messages"][-1]["content"]
    assert ".reports.due on reports.due (id daily-report@" in prompt
    assert prompt.endswith("Write the daily report.")
    triggers = [a.get_data()["trigger"]["id"] for a in answers]
    assert len(triggers) == len(set(triggers))


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ("  r:\n    publish: a\n", ":3: schedules.r.every: give every (an interval) or cron"),
        ("  r:\n    every: 1\n    publish: a\n    missed: later\n", ":6: schedules.r.missed:"),
        ("  r:\n    cron: nope\n    publish: a\n", ":4: schedules.r.cron: invalid cron"),
        ("  r:\n    every: 1\n    call: x.y\n", ":5: schedules.r.call: expected {agent"),
        ("  r:\n    every: .inf\n    publish: a\n", ":4: schedules.r.every: must be from"),
        ("  r:\n    every: 99999999999999d\n    publish: a\n", ":4: schedules.r.every:"),
        ("  r:\n    cron: 0 0 30 2 *\n    publish: a\n", ":4: schedules.r.cron: cron expr"),
        ("  r:\n    every: 1\n    publish: ops.*\n", ":5: schedules.r.publish: invalid subj"),
        (
            "  r:\n    every: 1\n    call: {agent: bad id*, method: m}\n",
            ":5: schedules.r.call: invalid agent id",
        ),
        ("  r:\n    every: 1\n    publish: a\n    data: .nan\n", ":6: schedules.r.data: data"),
        (
            "  r:\n    every: 1\n    publish: a\n    params: {x: 1}\n",
            ":6: schedules.r.params: params go with call",
        ),
        (
            "  r:\n    every: 1\n    call: {agent: a, method: rpc.ping}\n",
            ":5: schedules.r.call: cannot call 'rpc.ping': method names beginning with 'rpc.'",
        ),
    ],
)
def test_agent_file_schedules_are_checked(tmp_path: Path, block: str, problem: str) -> None:
    path = tmp_path / "x.agent.yaml"
    path.write_text("model: m\nschedules:\n" + block)
    with pytest.raises(AgentFileError) as caught:
        agent_class_from_file(path, client=None)
    assert problem in str(caught.value)
