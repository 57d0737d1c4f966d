"""What a task keeps of its answers: at most ``max_bytes`` of JSON.

The parts' values count as one JSON list (a text joined onto the text part before
it adds its bytes without quotes). From the first part that does not fit on, the
stored artifact stops growing and its metadata says so: ``{"truncated": true,
"omittedParts": ..., "omittedBytes": ..., "maxBytes": ...}``. This bounds what
``GetTask`` returns; a subscriber still gets every chunk.
"""

from __future__ import annotations

from typing import Any

import orjson

from a2a_bus.gateway.a2a.model import Artifact, Part


class AnswerBudget:
    """The bytes one task's stored answers take, against its bound."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        #: JSON bytes of the kept parts' values as one list: brackets, less the first comma.
        self.kept = 1
        #: What was left out, once a part did not fit: the truncated artifact's metadata
        #: (the same object, so counting here updates it).
        self.omitted: dict[str, Any] | None = None

    def keep(self, artifact: Artifact, parts: list[Part]) -> None:
        """Put parts on the stored artifact while the task stays within ``max_bytes``
        of JSON; from the first that does not fit on, they are only counted in the
        artifact's metadata."""
        for part in parts:
            size = _json_size(part)
            if self.omitted is None:
                if part.kind == "text" and artifact.ends_with_text:
                    grown = self.kept + size  # joined onto the text part before it
                else:
                    grown = self.kept + size + (3 if part.kind == "text" else 1)  # quotes, comma
                if grown <= self.max_bytes:
                    self.kept = grown
                    artifact.extend([part])
                    continue
                self.omitted = artifact.metadata = {
                    "truncated": True,
                    "omittedParts": 0,
                    "omittedBytes": 0,
                    "maxBytes": self.max_bytes,
                }
            self.omitted["omittedParts"] += 1
            self.omitted["omittedBytes"] += size


def _json_size(part: Part) -> int:
    """The bytes of a part's value as JSON (a text's without its quotes)."""
    if part.kind == "text":
        return len(orjson.dumps(part.value)) - 2
    return len(orjson.dumps(part.value, default=repr))
