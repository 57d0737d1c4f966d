"""In-order commit positions per partition, with concurrent out-of-order completion.

Handlers of one partition may finish in any order (different keys run
concurrently). The commit position of a partition only advances over a
contiguous run of finished offsets, so a crash never skips an unfinished
record. A record that yields several deliveries (a JSON-RPC batch) is finished
when all of them are.

Each tracker also keeps the redelivery *lease*: the offset below which this
owner may hand records to handlers. The lease is written with every commit as
commit metadata; a record at or past the lease is only handed out once a
commit carrying a larger lease has been acknowledged. A later owner therefore
knows that no record at or past the committed lease was ever handled before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection

LEASE_PREFIX = "a2a-lease="


def encode_lease(lease: int) -> str:
    """Commit metadata recording ``lease``."""
    return f"{LEASE_PREFIX}{lease}"


def decode_lease(metadata: str | None) -> int | None:
    """The lease recorded in commit metadata, or None if there is none."""
    if not metadata or not metadata.startswith(LEASE_PREFIX):
        return None
    try:
        return int(metadata[len(LEASE_PREFIX) :])
    except ValueError:
        return None


class PartitionTracker:
    """Dispatched and finished offsets of one partition, in offset order."""

    def __init__(self, start: int | None = None, *, lease: int = 0) -> None:
        # [offset, outstanding deliveries] in dispatch (= offset) order, and by offset
        self._pending: deque[list[int]] = deque()
        self._by_offset: dict[int, list[int]] = {}
        self._position = start
        self._committed: int | None = None
        self.lease = lease
        self.committed_lease = lease

    @property
    def position(self) -> int | None:
        """The offset to commit: the first unfinished record, or one past the last."""
        if self._pending:
            return self._pending[0][0]
        return self._position

    @property
    def in_flight(self) -> int:
        """Records handed out and not finished yet."""
        return len(self._pending)

    @property
    def dirty(self) -> bool:
        """True when position or lease moved since the last recorded commit."""
        position = self.position
        return position is not None and (
            position != self._committed or self.lease != self.committed_lease
        )

    def handed_out_end(self, excluded: Collection[int] = ()) -> int | None:
        """One past the last offset handed out, ``excluded`` offsets (records
        that never reached a handler) left aside; the position if none is left."""
        for entry in reversed(self._pending):
            if entry[0] not in excluded:
                return entry[0] + 1
        return self.position

    def add(self, offset: int, deliveries: int = 1) -> None:
        """Record that ``offset`` was handed out as ``deliveries`` deliveries."""
        if self._pending and offset <= self._pending[-1][0]:
            raise ValueError(f"offset {offset} dispatched out of order")
        if self._position is not None and not self._pending and offset < self._position:
            raise ValueError(f"offset {offset} is below the position {self._position}")
        if deliveries < 0:
            raise ValueError("deliveries must be >= 0")
        entry = [offset, deliveries]
        self._pending.append(entry)
        self._by_offset[offset] = entry
        if deliveries == 0:  # else the first pending entry is still unfinished
            self._drain()

    def finish(self, offset: int) -> None:
        """One delivery of ``offset`` finished."""
        entry = self._by_offset.get(offset)
        if entry is None:
            raise ValueError(f"offset {offset} is not in flight")
        if entry[1] <= 0:
            raise ValueError(f"offset {offset} finished more often than dispatched")
        entry[1] -= 1
        if entry[1] == 0 and entry is self._pending[0]:
            self._drain()

    def covers(self, offset: int, lease_size: int) -> bool:
        """True if ``offset`` is below the acknowledged lease, so it may be handed
        out now. Within half a lease of its end the lease is raised to
        ``offset + lease_size`` (once per acknowledged lease) for the next commit
        to carry, so it is extended before records have to wait for it."""
        committed = self.committed_lease
        if offset >= committed:
            return False
        if self.lease <= committed and offset >= committed - lease_size // 2:
            self.lease = offset + lease_size
        return True

    def committed(self, position: int, lease: int) -> None:
        """Remember what the broker acknowledged."""
        self._committed = position
        self.committed_lease = lease

    def _drain(self) -> None:
        pending = self._pending
        while pending and pending[0][1] == 0:
            offset = pending.popleft()[0]
            del self._by_offset[offset]
            self._position = offset + 1
