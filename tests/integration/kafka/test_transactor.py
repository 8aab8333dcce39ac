"""The worker's transactional producer against a real broker: the aborted transaction that ends
offsets its producer id left pending applies none of its own."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import TopicPartition

from adapter.kafka import clients
from adapter.kafka.transactor import Transactor
from tests.support import create_topic, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def test_ending_pending_offsets_leaves_the_committed_positions_as_they_were(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, 1, "Positions")
    group = unique("GID_positions")
    consumer = clients.consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False,
         "isolation.level": "read_committed"}
    )  # fmt: skip
    settings = {"bootstrap.servers": kafka_bootstrap, "transactional.id": unique("tx")}
    tx = Transactor(
        lambda: dict(settings), timeout_s=10, log=logging.getLogger("test"),
        stopping=threading.Event(),
    )  # fmt: skip
    try:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(0.2) is None and consumer.assignment(), timeout=60)
        at = [TopicPartition(topic, 0)]
        tx.begin()
        tx.commit([TopicPartition(topic, 0, 5)], consumer)

        tx.end_pending_offsets(at, consumer)

        assert [tp.offset for tp in consumer.committed(at, timeout=10)] == [5]
        tx.begin()
        tx.commit([TopicPartition(topic, 0, 7)], consumer)
        assert [tp.offset for tp in consumer.committed(at, timeout=10)] == [7]
        assert not tx.in_transaction
    finally:
        tx.close()
        consumer.close()
