"""The commit tracker of a Kafka partition: its position, its lease and the lease's metadata."""

from __future__ import annotations

import pytest

from a2a_bus.transport.kafka.commits import PartitionTracker, decode_lease, encode_lease


def test_position_stops_at_the_first_unfinished_offset() -> None:
    tracker = PartitionTracker(10)
    for offset in (10, 11, 12, 15):  # 13, 14: compacted away or control records
        tracker.add(offset)
    assert tracker.position == 10
    tracker.finish(12)
    tracker.finish(15)
    assert tracker.position == 10  # 10 and 11 still running
    tracker.finish(10)
    assert tracker.position == 11
    tracker.finish(11)
    assert tracker.position == 16
    assert tracker.in_flight == 0


def test_a_multi_delivery_record_finishes_with_its_last_delivery() -> None:
    tracker = PartitionTracker(0)
    tracker.add(0, deliveries=3)
    tracker.finish(0)
    tracker.finish(0)
    assert tracker.position == 0
    tracker.finish(0)
    assert tracker.position == 1


def test_a_record_without_deliveries_is_passed_with_those_before_it() -> None:
    tracker = PartitionTracker(0)
    tracker.add(0, deliveries=0)  # nothing running: the position passes it at once
    assert tracker.position == 1 and tracker.in_flight == 0
    tracker.add(1)
    tracker.add(2, deliveries=0)
    tracker.add(3)
    assert tracker.position == 1
    tracker.finish(1)
    assert tracker.position == 3  # over the finished 1 and the empty 2
    assert tracker.handed_out_end() == 4
    tracker.finish(3)
    assert tracker.position == 4 and tracker.in_flight == 0


def test_tracker_rejects_misuse() -> None:
    tracker = PartitionTracker(5)
    tracker.add(5)
    with pytest.raises(ValueError):
        tracker.add(5)
    with pytest.raises(ValueError):
        tracker.finish(6)
    tracker.finish(5)
    with pytest.raises(ValueError):
        tracker.finish(5)  # finished more often than handed out
    with pytest.raises(ValueError):
        tracker.add(3)
    with pytest.raises(ValueError):
        tracker.add(7, deliveries=-1)


def test_dirty_follows_position_and_lease() -> None:
    tracker = PartitionTracker(0, lease=100)
    assert tracker.dirty  # nothing committed yet
    tracker.committed(0, 100)
    assert not tracker.dirty
    tracker.add(0)
    tracker.finish(0)
    assert tracker.dirty
    tracker.committed(1, 100)
    tracker.lease = 200
    assert tracker.dirty


def test_lease_is_extended_before_it_runs_out() -> None:
    tracker = PartitionTracker(0, lease=100)
    tracker.committed(0, 100)
    assert tracker.covers(49, 100)
    assert tracker.lease == 100  # more than half the lease left: nothing to ask
    assert tracker.covers(50, 100)
    assert tracker.lease == 150 and tracker.dirty  # the next commit extends it
    assert tracker.covers(60, 100)
    assert tracker.lease == 150  # asked once per acknowledged lease
    assert not tracker.covers(100, 100)  # past the acknowledged lease: wait for it
    tracker.committed(0, 150)
    assert tracker.covers(100, 100)
    assert tracker.lease == 200


@pytest.mark.parametrize(
    ("metadata", "lease"),
    [(encode_lease(42), 42), ("", None), (None, None), ("other", None), ("a2a-lease=x", None)],
)
def test_lease_metadata(metadata: str | None, lease: int | None) -> None:
    assert decode_lease(metadata) == lease
