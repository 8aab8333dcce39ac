"""Reading one partition back from an offset to its end, as committed records only.

Not a RocketMQ behaviour: the broker reads its own commit log; the adapter's workers and admin
commands read Kafka partitions back (OP on takeover, HALF for ``transactions list``). The end
is the partition's last stable offset, so an open transaction of a dead worker is not waited
for; its records become visible, or vanish, once Kafka ends it.

Known gaps: none.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter.exceptions import AdapterError

READER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
}


def read_to_end(
    settings: dict[str, Any], topic: str, partition: int, start: int, timeout_s: float
) -> Iterator[KafkaRecord]:
    """Every committed record of ``topic`` partition ``partition`` from ``start`` (or its first
    record, when ``start`` is negative) to the end; ``AdapterError`` if that takes too long."""
    conf = {"group.id": "rmq-adapter-read-back", **settings, **READER_SETTINGS}
    reader = Consumer(conf)
    try:
        reader.assign([TopicPartition(topic, partition, start if start >= 0 else -2)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            record = reader.poll(0.5)
            if record is None:
                continue
            error = record.error()
            if error is None:
                yield record
            elif error.code() == KafkaError._PARTITION_EOF:
                return
            elif error.fatal() or not error.retriable():
                raise KafkaException(error)
        raise AdapterError(f"{topic} partition {partition} could not be read back in {timeout_s} s")
    finally:
        reader.close()
