"""Reading what reached a topic, read_committed, as a consumer would see it."""

from __future__ import annotations

import time

from confluent_kafka import Message as KafkaRecord
from confluent_kafka import TopicPartition

from adapter import properties as prop
from adapter.kafka import clients
from tests.support import unique


def records_with_ids(bootstrap: str, topic: str, ids: set[str], timeout: float = 60) -> list:
    """The committed records of ``topic`` whose ``UNIQ_KEY`` is one of ``ids``, once all are
    there (and a moment more, so that a second copy would be seen too)."""
    reader = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    found: list = []
    try:
        partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
        reader.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout
        settled_at = None
        while settled_at is None or time.monotonic() < settled_at:
            assert time.monotonic() < deadline, f"not all of {ids} reached {topic}"
            for record in reader.consume(500, 0.2):
                uniq = dict(record.headers() or []).get(prop.UNIQ_KEY, b"").decode()
                if record.error() is None and uniq in ids:
                    found.append(record)
            seen = {dict(r.headers())[prop.UNIQ_KEY].decode() for r in found}
            if settled_at is None and seen == ids:
                settled_at = time.monotonic() + 1.0
    finally:
        reader.close()
    return found


def all_records(bootstrap: str, topic: str, quiet_s: float = 1.0) -> list[KafkaRecord]:
    """Every committed record of ``topic``, once nothing more came for ``quiet_s``."""
    reader = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    found: list[KafkaRecord] = []
    try:
        partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
        reader.assign([TopicPartition(topic, p, 0) for p in partitions])
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < quiet_s:
            batch = [r for r in reader.consume(500, 0.2) if r.error() is None]
            if batch:
                found.extend(batch)
                quiet_since = time.monotonic()
    finally:
        reader.close()
    return found


def uniq(record: KafkaRecord) -> str:
    return dict(record.headers() or []).get(prop.UNIQ_KEY, b"").decode()
