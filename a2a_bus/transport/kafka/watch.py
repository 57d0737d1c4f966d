"""Is the broker still there? A look in the background, for readiness checks.

aiokafka reconnects by itself and tells nobody when a broker is gone: its
producer notices only when it sends, its consumers when a fetch or heartbeat
fails, and none of it is public. :class:`BrokerWatch` asks the cluster for one
topic's metadata every ``interval`` seconds (one small request through the
transport's admin client) and keeps what it found, so
:attr:`~a2a_bus.transport.base.Transport.connection_problem` is a read, not a
round trip. While the broker is out of reach it looks less often (up to
``max_interval``), and says so in the log once when it is lost and once when it
is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from a2a_bus.runtime.loops import stop_task

log = logging.getLogger(__name__)


class BrokerWatch:
    """Keeps ``problem``: why the broker did not answer the last look, or None."""

    def __init__(
        self,
        look: Callable[[], Awaitable[object]],
        where: str,
        *,
        interval: float = 1.0,
        timeout: float = 3.0,
        max_interval: float = 5.0,
    ) -> None:
        self._look = look
        self._where = where
        self.interval = interval
        self.timeout = timeout
        self.max_interval = max_interval
        self.problem: str | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.problem = None
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_task(task)

    async def _run(self) -> None:
        delay = self.interval
        while True:
            await asyncio.sleep(delay)
            problem = await self.check()
            if problem is not None and self.problem is None:
                log.warning("%s; not ready until it answers again", problem)
            elif problem is None and self.problem is not None:
                log.warning("Kafka at %s answers again", self._where)
            self.problem = problem
            delay = self.interval if problem is None else min(delay * 2, self.max_interval)

    async def check(self) -> str | None:
        """One look now: why the broker did not answer, or None."""
        try:
            async with asyncio.timeout(self.timeout):
                await self._look()
        except TimeoutError:
            return f"cannot reach Kafka at {self._where}: no answer within {self.timeout:g} s"
        except Exception as exc:  # aiokafka's errors, OSError: the broker is out of reach
            return f"cannot reach Kafka at {self._where}: {type(exc).__name__}: {exc}"
        return None
