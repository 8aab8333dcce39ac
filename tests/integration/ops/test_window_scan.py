"""Reading records by their place, as a query answered by the message index does, and scanning
only past a partition's given offset, on a real broker."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from adapter import naming
from adapter.kafka import clients
from adapter.ops.window_scan import fetch, scan

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(60)]


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = clients.producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(topic, f"m{n}".encode(), partition=0)
    producer.flush(30)


def test_records_are_read_by_place_and_places_that_hold_none_are_named(
    kafka_bootstrap: str, new_topic, admin
) -> None:
    topic = naming.kafka_topic(new_topic(1, "Placed"))
    fill(kafka_bootstrap, topic, 6)
    conf = {"bootstrap.servers": kafka_bootstrap}
    found, gone = fetch(conf, [(topic, 0, 4), (topic, 0, 1), (topic, 0, 9)], 20)
    assert [(r.offset(), r.value()) for r in found] == [(1, b"m1"), (4, b"m4")]
    assert gone == [(topic, 0, 9)], "past the end: no record there"
    for future in admin.delete_records([TopicPartition(topic, 0, 3)]).values():
        future.result(timeout=30)
    found, gone = fetch(conf, [(topic, 0, 1), (topic, 0, 5)], 20)
    assert [r.offset() for r in found] == [5]
    assert gone == [(topic, 0, 1)], "deleted: no record there any more"


def test_a_scan_past_given_offsets_reads_only_the_records_after_them(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = naming.kafka_topic(new_topic(1, "Tail"))
    fill(kafka_bootstrap, topic, 5)
    conf = {"bootstrap.servers": kafka_bootstrap}
    tail = scan(conf, [topic], 0, 2**42, lambda _r: True, 20, after={(topic, 0): 3})
    assert [r.offset() for r in tail.found] == [3, 4]
    assert tail.records == 2
