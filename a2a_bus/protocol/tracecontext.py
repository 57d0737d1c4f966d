"""W3C Trace Context on events: the CloudEvents distributed-tracing extension.

Every event the bus sends carries ``traceparent`` (and ``tracestate`` when the
trace has one), in both Kafka content modes and on HTTP: a message continues the
trace of the message whose handler sent it, and a message that enters the bus
continues its sender's trace (an HTTP ``traceparent`` header, a Kafka record
header, or the event's own attribute) or starts one. A malformed value is
ignored, never an error: the trace starts afresh. What the bus passes on is
version ``00`` with only the ``sampled`` flag kept: W3C Trace Context level 1
asks that flags a vendor does not know be zeroed. See protocol/PROTOCOL.md.
"""

from __future__ import annotations

import random
import re
from collections.abc import MutableMapping
from typing import Any, Final, NamedTuple

from a2a_bus.protocol.constants import ext

TRACEPARENT: Final = ext.TRACEPARENT
TRACESTATE: Final = ext.TRACESTATE
#: ``00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>``; a later version may
#: append fields after a dash (the specification's rule for parsing them).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
#: The one trace flag of W3C Trace Context level 1; the others are zeroed when passed on.
SAMPLED: Final = 0x01
#: The specification's bound on a ``tracestate`` value (32 members of at most 256 chars).
MAX_TRACESTATE = 512
_random_bits = random.getrandbits


class TraceParent(NamedTuple):
    """A parsed ``traceparent``: ids as lowercase hex, flags as an integer."""

    trace_id: str
    parent_id: str
    flags: int

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def header(self) -> str:
        """As this bus sends it: version ``00``, whatever version it came in, and
        no flag but ``sampled``."""
        return format_traceparent(int(self.trace_id, 16), int(self.parent_id, 16), self.flags)


def parse_traceparent(value: Any) -> TraceParent | None:
    """The trace context ``value`` holds, or None when it is not a valid one."""
    if type(value) is not str:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_id, parent_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return TraceParent(trace_id, parent_id, int(flags, 16))


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """A version ``00`` ``traceparent`` (ids as integers, as OpenTelemetry keeps them);
    of ``flags`` only ``sampled`` is kept (the others are unknown to level 1)."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags & SAMPLED:02x}"


def propagated_traceparent(value: Any) -> str | None:
    """The ``traceparent`` the bus passes on for ``value`` (version ``00``, no flag but
    ``sampled``), or None when ``value`` is not a valid one."""
    parsed = parse_traceparent(value)
    if parsed is None:
        return None
    # Most already are what is sent: formatting them again would cost more than this.
    if parsed.flags & ~SAMPLED or value[:3] != "00-":
        return parsed.header()
    return value  # a valid one is a str


def new_traceparent() -> str:
    """A ``traceparent`` starting a new trace: fresh random ids, sampled."""
    # One draw, as bytes: formatting a big integer as hex costs more than this.
    ids = _random_bits(192).to_bytes(24).hex()
    return f"00-{ids[:32]}-{ids[32:]}-01"


def valid_tracestate(value: Any) -> bool:
    """True for a ``tracestate`` worth passing on: W3C's list of at most 32
    ``key=value`` members (keys unique), within the bound. Anything else is
    dropped whole, as the specification asks (an OpenTelemetry SDK would drop it
    too, with a warning per message)."""
    if type(value) is not str or not 0 < len(value) <= MAX_TRACESTATE or not value.isascii():
        return False
    keys: set[str] = set()
    for member in value.split(","):
        member = member.strip(" \t")
        if not member:
            continue  # empty members are allowed
        matched = _MEMBER.fullmatch(member)
        if matched is None or matched[1] in keys:
            return False
        keys.add(matched[1])
    return 0 < len(keys) <= MAX_TRACESTATE_MEMBERS


#: List members of a ``tracestate`` (W3C Trace Context).
MAX_TRACESTATE_MEMBERS = 32
_KEY_CHARS = r"[a-z0-9_\-*/]"
_MEMBER = re.compile(
    rf"([a-z]{_KEY_CHARS}{{0,255}}|[a-z0-9]{_KEY_CHARS}{{0,240}}@[a-z]{_KEY_CHARS}{{0,13}})"
    r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)


def adopt_trace(
    attributes: MutableMapping[str, Any],
    traceparent: Any = None,
    tracestate: Any = None,
) -> None:
    """Give an event entering the bus the trace it continues.

    Its own valid ``traceparent`` stays (with a valid ``tracestate``); else the
    transport's (``traceparent``/``tracestate`` headers) is taken when valid. A
    malformed value is dropped: without one the bus starts a new trace.
    """
    own = propagated_traceparent(attributes.get(TRACEPARENT))
    if own is not None:
        # A later version's extra fields and unknown flags are not carried on (the
        # specification's rules).
        attributes[TRACEPARENT] = own
        if TRACESTATE in attributes and not valid_tracestate(attributes[TRACESTATE]):
            del attributes[TRACESTATE]
        return
    attributes.pop(TRACEPARENT, None)
    attributes.pop(TRACESTATE, None)
    given = propagated_traceparent(traceparent)
    if given is not None:
        attributes[TRACEPARENT] = given
        if valid_tracestate(tracestate):
            attributes[TRACESTATE] = tracestate
