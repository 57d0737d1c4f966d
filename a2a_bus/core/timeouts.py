"""Request timeouts: the ones a caller may give, when a wait ends, and the answer
a caller gets when it did."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a_bus.protocol import ErrorCode, error_response


def timeout_response(timeout: float) -> dict[str, Any]:
    """The answer (-32001) of a request still unanswered after ``timeout`` seconds."""
    return error_response(ErrorCode.TIMEOUT, "Request timed out", None, {"timeout": timeout})


def check_timeout(timeout: float) -> float:
    """``timeout``, unless it is no positive number of seconds (ValueError): NaN
    would never end a wait, and 0 or less would end it before any answer.
    ``math.inf`` waits for as long as it takes."""
    try:
        positive = timeout > 0
    except TypeError:  # a string, say: its comparison would fail further in, bare
        positive = False
    if not positive or type(timeout) is bool:
        kind = "" if isinstance(timeout, int | float) else f"{type(timeout).__name__} "
        raise ValueError(f"timeout must be a positive number of seconds, not {kind}{timeout!r}")
    return timeout


def deadline(loop: asyncio.AbstractEventLoop, timeout: float) -> float:
    """When a wait of ``timeout`` seconds from now ends (:func:`check_timeout`)."""
    return loop.time() + check_timeout(timeout)
