"""adapter.kafka.reading against a real broker: reading back to the end, open transactions too."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from adapter import naming
from adapter.exceptions import AdapterError
from adapter.kafka import clients, reading
from tests.support import unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def transactional_producer(bootstrap: str) -> Producer:
    producer = clients.producer(
        {"bootstrap.servers": bootstrap, "transactional.id": unique("tx-io")}
    )
    producer.init_transactions(30)
    return producer


def values(records: list) -> list[bytes]:  # type: ignore[type-arg]
    return [r.value() for r in records]


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_read_to_end_waits_for_a_transaction_open_when_reading_began(
    kafka_bootstrap, new_topic, ending: str
) -> None:
    topic = naming.kafka_topic(new_topic(partitions=1))
    conf = {"bootstrap.servers": kafka_bootstrap}
    producer = transactional_producer(kafka_bootstrap)
    producer.begin_transaction()
    producer.produce(topic, b"before", partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"in flight", partition=0)
    producer.flush(30)
    end = threading.Timer(
        1.0, producer.commit_transaction if ending == "commit" else producer.abort_transaction
    )
    end.start()
    try:
        started = time.monotonic()
        read = values(list(reading.read_to_end(conf, topic, {0: 0}, timeout_s=30)))
    finally:
        end.join()
    assert time.monotonic() - started >= 0.9, "the reader waited for the transaction to end"
    expected = [b"before", b"in flight"] if ending == "commit" else [b"before"]
    assert read == expected


def test_read_to_end_names_the_partition_an_open_transaction_holds(
    kafka_bootstrap, new_topic
) -> None:
    topic = naming.kafka_topic(new_topic(partitions=1))
    producer = transactional_producer(kafka_bootstrap)
    producer.begin_transaction()
    producer.produce(topic, b"held", partition=0)
    producer.flush(30)
    try:
        with pytest.raises(AdapterError, match=r"open transaction holds partitions 0 at 0 of 1"):
            list(reading.read_to_end({"bootstrap.servers": kafka_bootstrap}, topic, {0: 0}, 2.0))
    finally:
        producer.abort_transaction(30)


def test_log_ends_count_the_records_of_open_transactions(kafka_bootstrap, new_topic) -> None:
    topic = naming.kafka_topic(new_topic(partitions=2))
    producer = transactional_producer(kafka_bootstrap)
    producer.begin_transaction()
    for _ in range(3):
        producer.produce(topic, b"x", partition=1)
    producer.flush(30)
    try:
        assert reading.log_ends({"bootstrap.servers": kafka_bootstrap}, topic, [0, 1], 10) == {
            0: 0,
            1: 3,
        }
    finally:
        producer.abort_transaction(30)
