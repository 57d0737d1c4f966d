"""Agent actor threads are daemons kept alive by one keeper thread (runtime.keepalive)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from a2a_bus import Agent, Bus, method
from a2a_bus.runtime.keepalive import KeepAlive

#: A process that starts a bus with one agent and returns from its main thread.
#: A daemon thread answers stdin once the interpreter is shutting down (the
#: main thread is joined then): each line is sent to the agent, and "stop" stops
#: the actors (pykka's own way: a bus cannot stop while the interpreter shuts down).
FALLS_OFF_MAIN = textwrap.dedent(
    """
    import sys
    import threading

    import pykka

    from a2a_bus import Agent, Bus, method


    class Echo(Agent):
        agent_id = "echo"

        @method
        def echo(self, value: str) -> str:
            return value


    bus = Bus.memory().start()
    bus.spawn(Echo)


    def serve() -> None:
        threading.main_thread().join()  # returns once the interpreter shuts down
        for line in sys.stdin:
            if line.strip() == "stop":
                pykka.ActorRegistry.stop_all(block=True)
                return
            print(bus.client().request("echo", "echo", [line.strip()]), flush=True)


    threading.Thread(target=serve, daemon=True).start()
    print("ready", flush=True)
    """
)


def _non_daemon_threads() -> int:
    return sum(not thread.daemon for thread in threading.enumerate())


def test_agents_add_one_non_daemon_thread_however_many_run() -> None:
    # Each live non-daemon thread made every later thread start slower (CPython
    # < 3.13 scans them all): spawning agents was quadratic.
    def ping(self: Agent) -> str:
        return self.agent_id

    agents = [
        type(f"Kept{n}", (Agent,), {"agent_id": f"kept-{n}", "ping": method(ping)})
        for n in range(20)
    ]
    before = _non_daemon_threads()
    with Bus.memory() as bus:
        for agent in agents:
            bus.spawn(agent)
        assert bus.client().request("kept-19", "ping") == "kept-19"
        assert _non_daemon_threads() == before + 1  # the keeper
    assert _non_daemon_threads() == before


def test_the_process_stays_alive_while_an_agent_runs_after_main_returns() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", FALLS_OFF_MAIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = child.communicate("hello\nstill here\nstop\n", timeout=120)
    finally:
        child.kill()
    assert out.splitlines() == ["ready", "hello", "still here"], err
    assert child.returncode == 0, err  # exits once its agent stopped


def test_the_keeper_runs_while_anything_is_counted_and_ends_at_zero() -> None:
    keep = KeepAlive("test-keeper")

    def keepers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "test-keeper"]

    keep.enter()
    keep.enter()
    [keeper] = keepers()
    assert not keeper.daemon
    keep.leave()
    assert keeper.is_alive() and keep.count == 1
    keep.leave()
    keeper.join(60)
    assert not keeper.is_alive()
    keep.enter()  # counted again: a new keeper
    [again] = keepers()
    assert again is not keeper
    keep.leave()
    again.join(60)
    assert not keepers()
