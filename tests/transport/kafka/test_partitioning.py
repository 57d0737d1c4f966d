"""The partitioner (murmur2, ``pick_partition``): the same partitions as aiokafka's."""

from __future__ import annotations

import random

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from a2a_bus.transport.kafka.partitioning import murmur2, pick_partition


def test_partitions_are_those_of_aiokafkas_default_partitioner() -> None:
    rng = random.Random(7)
    for length in range(40):
        for _ in range(20):
            key = rng.randbytes(length)
            assert murmur2(key) == aiokafka_murmur2(key)
            for count in (1, 3, 7):
                every = list(range(count))
                assert pick_partition(key, every, every) == DefaultPartitioner()(key, every, every)
    assert pick_partition(None, [0, 1, 2], [2]) == 2  # no key: an available one
