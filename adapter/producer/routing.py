"""Which queue (Kafka partition) an orderly message goes to.

Reproduces RocketMQ's ``SelectMessageQueueByHash``: ``abs(key.hashCode() % queue_count)``
with Java's ``String.hashCode`` (31-based over UTF-16 code units, 32-bit signed), so a key
lands on the same queue number as it would from a Java producer.

Known gaps: the C++ core under rocketmq-client-python hashes with ``std::hash``, whose value
is implementation-defined; we follow the documented Java rule instead.
"""

from __future__ import annotations


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: a 32-bit signed int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def queue_for_sharding_key(key: str, queue_count: int) -> int:
    """The queue id for ``key`` among ``queue_count`` queues."""
    if queue_count <= 0:
        raise ValueError(f"queue_count must be positive, got {queue_count}")
    return abs(java_string_hash(key)) % queue_count
