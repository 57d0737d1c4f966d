"""A replica alone: restarts after crashes, also when making the fresh agent fails."""

from __future__ import annotations

import asyncio

from a2a_bus import Agent, RestartPolicy
from a2a_bus.core.metrics import Metrics
from a2a_bus.hosting.actor import Job
from a2a_bus.hosting.supervisor import Replica

WAIT = 30.0


async def test_a_restart_whose_agent_constructor_fails_is_tried_again() -> None:
    made = 0

    def factory() -> Agent:
        nonlocal made
        made += 1
        if made == 2:  # the first restart: e.g. a resource the constructor needs is down
            raise ConnectionError("backend down")
        return Agent()

    def crash_on_first_instance(agent: Agent) -> int:
        if made == 1:
            raise RuntimeError("crash")
        return made

    metrics = Metrics()
    policy = RestartPolicy(max_retries=2, backoff_initial=0.001, backoff_max=0.01)
    replica = Replica(factory, name="r#0", mailbox_size=4, policy=policy, metrics=metrics)
    replica.start()
    outcome = await asyncio.wait_for(replica.submit(Job(crash_on_first_instance, "job")), WAIT)
    assert (outcome.result, outcome.crash, made) == (3, None, 3)
    assert metrics.restarts == 2
    await asyncio.wait_for(replica.stop(), WAIT)
