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
        #: Offsets handed out that the position has not passed yet, in offset order.
        self._pending: deque[int] = deque()
        #: Deliveries still running, by offset (a finished offset is not in it).
        self._unfinished: dict[int, int] = {}
        self._position = start
        self._committed: int | None = None
        self.lease = lease
        self.committed_lease = lease

    @property
    def position(self) -> int | None:
        """The offset to commit: the first unfinished record, or one past the last."""
        if self._pending:
            return self._pending[0]
        return self._position

    @property
    def in_flight(self) -> int:
        """Records handed out that the position has not passed yet."""
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
        for offset in reversed(self._pending):
            if offset not in excluded:
                return offset + 1
        return self.position

    def add(self, offset: int, deliveries: int = 1) -> None:
        """Record that ``offset`` was handed out as ``deliveries`` deliveries."""
        pending = self._pending
        if pending:
            if offset <= pending[-1]:
                raise ValueError(f"offset {offset} dispatched out of order")
        elif self._position is not None and offset < self._position:
            raise ValueError(f"offset {offset} is below the position {self._position}")
        if deliveries > 0:
            self._unfinished[offset] = deliveries
            pending.append(offset)
        elif deliveries < 0:
            raise ValueError("deliveries must be >= 0")
        elif pending:  # finished at once: passed once those before it finish
            pending.append(offset)
        else:
            self._position = offset + 1

    def finish(self, offset: int) -> None:
        """One delivery of ``offset`` finished."""
        unfinished = self._unfinished
        left = unfinished.get(offset)
        if left is None:
            raise ValueError(f"offset {offset} is not in flight (or finished already)")
        if left > 1:
            unfinished[offset] = left - 1
            return
        del unfinished[offset]
        pending = self._pending
        if pending[0] == offset:  # the position moves past the finished run it starts
            popleft = pending.popleft
            passed = popleft()
            while pending and pending[0] not in unfinished:
                passed = popleft()
            self._position = passed + 1

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
