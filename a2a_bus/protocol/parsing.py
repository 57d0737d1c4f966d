"""Parsing JSON that arrives from outside: orjson, and a refusal of integers it cannot carry.

orjson reads an integer literal outside the 64-bit range (below -2**63 or above
2**64-1) as a float, and cannot write one back: such a number would reach an agent,
or come back as a request's id, as a different number. Every place that parses
inbound JSON bytes does it with :func:`parse_json`, which refuses them instead.

The check costs a translate and a find when no run of 20 digits (or of a minus sign
and 19 digits) is in the bytes, which is nearly always; only then are the number
literals read exactly.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from a2a_bus.protocol.errors import ProtocolError

#: The integers orjson reads and writes exactly.
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1

# Every literal outside the range has 20 characters of [0-9-] in a row (20 digits, or
# "-" and 19): digits and "-" become "0", and one find says whether any such run is there.
_DIGITS_AND_MINUS = bytes.maketrans(b"123456789-", b"0000000000")
_RUN = b"0" * 20
# Strings are matched whole so that digits inside them are skipped; a long integer
# literal is one not continued by a fraction or exponent, nor part of another number.
_STRING_OR_LONG_INTEGER = re.compile(rb'"(?:[^"\\]++|\\.)*+"|(?<![\d.eE+-])-?\d{19,}(?![\d.eE])')
_SHOWN = 24  # characters of a refused literal named in the error


def parse_json(body: bytes) -> Any:
    """The JSON value of ``body``; raises :class:`ProtocolError`: -32700 for bytes
    that are not JSON, -32600 for an integer outside -2**63 .. 2**64-1 (its id null:
    the id may be the number)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError.parse(str(exc)) from None
    if body.translate(_DIGITS_AND_MINUS).find(_RUN) >= 0:
        literal = out_of_range_integer(body)
        if literal is not None:
            raise ProtocolError.invalid(
                f"integer {_shown(literal)} is outside the 64-bit range this bus carries "
                f"({INT_MIN} to {INT_MAX}); send it as a string"
            )
    return value


def whole_number(text: str | None, max_digits: int = 18) -> int | None:
    """The non-negative integer ``text`` writes in ASCII digits (spaces around it
    ignored), or None: for a header, a query parameter or a cursor's part, where
    ``int()`` would take what ``str.isdigit`` lets through ('²', other scripts'
    digits, underscores) only to raise, or spend long on thousands of digits."""
    if text is None:
        return None
    digits = text.strip()
    if not (0 < len(digits) <= max_digits and digits.isascii() and digits.isdigit()):
        return None
    return int(digits)


def out_of_range_integer(body: bytes) -> str | None:
    """The first integer literal of the JSON text ``body`` outside
    ``INT_MIN .. INT_MAX``, or None. ``body`` must be valid JSON."""
    for match in _STRING_OR_LONG_INTEGER.finditer(body):
        token = match.group()
        if token[0] == 0x22:  # '"': a string
            continue
        # int() of a very long literal is slow (and refused past 4300 digits): the
        # length alone decides above 20 digits.
        if len(token.lstrip(b"-")) > 20 or not INT_MIN <= int(token) <= INT_MAX:
            return token.decode()
    return None


def _shown(literal: str) -> str:
    if len(literal) <= _SHOWN:
        return literal
    digits = len(literal.lstrip("-"))
    return f"{literal[:_SHOWN]}... ({digits} digits)"
