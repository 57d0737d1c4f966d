"""The agent of the broker fault tests, served by ``a2a-bus serve`` in a worker process.

``work(n)`` appends one JSON line ``{"n", "redelivered", "pid"}`` to the file named by
``FAULTS_LOG`` (O_APPEND, one ``write`` per line, so it survives ``kill -9``) and
returns ``n``.
"""

from __future__ import annotations

import os

import orjson

from a2a_bus import Agent, method

_LOG = os.open(os.environ["FAULTS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


class Worker(Agent):
    agent_id = "worker"

    @method
    def work(self, n: int) -> int:
        line = {"n": n, "redelivered": self.redelivered, "pid": os.getpid()}
        os.write(_LOG, orjson.dumps(line) + b"\n")
        return n
