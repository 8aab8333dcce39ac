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
    settings: dict[str, Any], topic: str, starts: dict[int, int], timeout_s: float
) -> Iterator[KafkaRecord]:
    """Every committed record of the partitions of ``topic`` named in ``starts``, each from
    its start offset (its first record when negative) to its end; ``AdapterError`` if that
    takes longer than ``timeout_s``."""
    if not starts:
        return
    conf = {"group.id": "rmq-adapter-read-back", **settings, **READER_SETTINGS}
    reader = Consumer(conf)
    try:
        reader.assign(
            [TopicPartition(topic, p, start if start >= 0 else -2) for p, start in starts.items()]
        )
        open_partitions = set(starts)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            record = reader.poll(0.2)
            if record is None:
                continue
            error = record.error()
            if error is None:
                yield record
            elif error.code() == KafkaError._PARTITION_EOF:
                open_partitions.discard(record.partition() or 0)
                if not open_partitions:
                    return
            elif error.fatal() or not error.retriable():
                raise KafkaException(error)
        raise AdapterError(f"{topic} could not be read back within {timeout_s} s")
    finally:
        reader.close()
