"""Which partition a record goes to: what aiokafka's default partitioner picks.

Kafka's murmur2 of the key modulo the topic's partitions, or a random available
partition for a record without a key; the bus's batches pick partitions here so
that keys land where ``AIOKafkaProducer.send`` would put them.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

_MASK = 0xFFFFFFFF
_M = 0x5BD1E995
_WORDS: dict[int, struct.Struct] = {}


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), equal to
    aiokafka's ``murmur2`` but reading four bytes at a time."""
    length = len(data)
    h = 0x9747B28C ^ length
    words = length >> 2
    unpack = _WORDS.get(words)
    if unpack is None:
        unpack = _WORDS[words] = struct.Struct(f"<{words}I")
    for k in unpack.unpack_from(data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        h = ((h * _M) & _MASK) ^ ((k * _M) & _MASK)
    tail = length & ~3
    extra = length & 3
    if extra == 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra:
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def pick_partition(key: bytes | None, every: Sequence[int], available: Sequence[int]) -> int:
    """The partition aiokafka's ``DefaultPartitioner`` picks for ``key``."""
    if key is None:
        return random.choice(available or every)
    if len(every) == 1:  # what the hash would pick: the one partition, at no cost
        return every[0]
    return every[(murmur2(key) & 0x7FFFFFFF) % len(every)]


__all__ = ["murmur2", "pick_partition"]
