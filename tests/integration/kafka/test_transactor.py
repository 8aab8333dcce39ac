"""The worker's transactional producer against a real broker: the aborted transaction that ends
offsets its producer id left pending applies none of its own; a producer still initialising when
Kafka went away is resumed, not replaced; fences never stop it."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaException, TopicPartition

from adapter.exceptions import KafkaUnavailableError
from adapter.kafka import clients
from adapter.kafka.transactor import Transactor
from tests.brokers import Broker
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


def transactor(settings: dict[str, str], made: list[int] | None = None) -> Transactor:
    def new_settings() -> dict[str, str]:
        if made is not None:
            made.append(1)
        return dict(settings)

    return Transactor(
        new_settings, timeout_s=3, log=logging.getLogger("test"), stopping=threading.Event()
    )


@pytest.mark.long  # twenty seconds: Kafka stopped under an initialising producer
def test_a_producer_still_initialising_when_kafka_went_away_is_resumed_not_replaced(
    own_kafka: Broker,
) -> None:
    """A replaced one went on initialising in librdkafka, and fenced its replacement."""
    made: list[int] = []
    tx = transactor(
        {"bootstrap.servers": own_kafka.bootstrap, "transactional.id": unique("tx")}, made
    )
    own_kafka.down()
    try:
        for _ in range(2):
            with pytest.raises(KafkaUnavailableError):
                tx.open()
    finally:
        own_kafka.up()
    try:
        wait_until(lambda: opened(tx), timeout=60, what="the producer to initialise")
        tx.begin()
        tx.produce(create_topic(own_kafka.bootstrap, 1, "Resumed"), b"after the outage")
        tx.commit()
        assert made == [1], "one producer for the whole outage"
    finally:
        tx.close()


def opened(tx: Transactor) -> bool:
    try:
        tx.open()
    except KafkaUnavailableError:
        return False
    return True


def test_two_workers_given_one_id_fence_each_other_and_neither_stops(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 1, "Twins")
    settings = {"bootstrap.servers": kafka_bootstrap, "transactional.id": unique("tx")}
    first, second = transactor(settings), transactor(settings)
    try:
        for _ in range(3):  # each fenced three times in a row, within a minute
            first.begin()
            first.produce(topic, b"first")
            second.open()  # fences the first
            with pytest.raises(KafkaException, match="fenced"):
                first.commit()
            first.open()  # fences the second
            second.begin()
            second.produce(topic, b"second")
            with pytest.raises(KafkaException, match="fenced"):
                second.commit()
        first.begin()
        first.produce(topic, b"first, at last")
        first.commit()
        assert not first.in_transaction
    finally:
        first.close()
        second.close()
