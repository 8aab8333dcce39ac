"""Consumer retry through %RETRY%<group> and the dead-letter topic, with short delay levels.

These tests run on a broker of their own whose SCHEDULE_TOPIC_XXXX has four one-or-two second
levels, so that retries at level 3 + reconsume_times come back within seconds.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.client import ConsumeStatus, Message
from adapter.config import ENV_DELAY_LEVELS
from adapter.delay import DelayLevels
from adapter.kafka import clients
from tests.brokers import Broker
from tests.support import (
    committed_offsets,
    create_topic,
    init_system_topics,
    read_committed,
    send,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

SHORT = "1s 1s 1s 2s"
SPRING = "kafka_dlt-original-offset"


@pytest.fixture(scope="module")
def short_kafka(own_kafka: Broker) -> Broker:
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse(SHORT))
    return own_kafka


@pytest.fixture(autouse=True)
def short_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DELAY_LEVELS, SHORT)


@pytest.fixture
def forwarder(short_kafka: Broker, start_forwarder):
    return start_forwarder(bootstrap=short_kafka.bootstrap, levels=DelayLevels.parse(SHORT))


def topic_on(broker: Broker) -> str:
    return create_topic(broker.bootstrap, 2, "Retry")


class FailingCallback:
    """Fails the first ``failures`` deliveries with the given outcomes, then succeeds."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.deliveries: list[tuple[str, int, str, float]] = []
        self.lock = threading.Lock()

    def __call__(self, message):
        with self.lock:
            self.deliveries.append(
                (message.topic, message.reconsume_times, message.id, time.monotonic())
            )
            outcome = self.outcomes.pop(0) if self.outcomes else ConsumeStatus.CONSUME_SUCCESS
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_a_failed_message_comes_back_through_the_retry_topic_until_it_succeeds(
    short_kafka: Broker, forwarder, make_producer, make_consumer, new_group
) -> None:
    topic = topic_on(short_kafka)
    group = new_group()
    callback = FailingCallback(ConsumeStatus.RECONSUME_LATER, ConsumeStatus.RECONSUME_LATER)
    make_consumer(group, topic, callback, bootstrap=short_kafka.bootstrap)
    producer = make_producer(bootstrap=short_kafka.bootstrap)
    msg_id = send(producer, topic, "try me", tags="TagA").msg_id

    wait_until(lambda: len(callback.deliveries) >= 3, timeout=60, what="two retries")
    time.sleep(2)  # a fourth delivery would show by now
    assert [d[:3] for d in callback.deliveries] == [
        (topic, 0, msg_id),
        (topic, 1, msg_id),
        (topic, 2, msg_id),
    ], "the callback sees the original topic, the same id and the count of retries"
    offsets = committed_offsets(short_kafka.bootstrap, group, topic, 2)
    assert sum(o for o in offsets.values() if o > 0) == 1, "the original is committed"


def test_a_message_that_keeps_failing_goes_to_the_dead_letter_topic(
    short_kafka: Broker, forwarder, make_producer, make_consumer, new_group
) -> None:
    topic = topic_on(short_kafka)
    group = new_group()
    callback = FailingCallback(
        RuntimeError("boom"), None, ConsumeStatus.RECONSUME_LATER, ConsumeStatus.RECONSUME_LATER
    )
    make_consumer(group, topic, callback, bootstrap=short_kafka.bootstrap, max_reconsume_times=2)
    producer = make_producer(bootstrap=short_kafka.bootstrap)
    msg_id = send(producer, topic, "hopeless", keys="order-7", color="red").msg_id

    dlq = naming.kafka_topic(naming.dlq_topic(group))
    reader = clients.consumer(
        {"bootstrap.servers": short_kafka.bootstrap, "group.id": unique("dlq")}
    )
    try:
        wait_until(lambda: dlq in reader.list_topics(timeout=5).topics, timeout=60, what="the DLQ")
        reader.assign([TopicPartition(dlq, 0, 0)])
        record = wait_until(lambda: reader.poll(0.5), timeout=60, what="the dead letter")
    finally:
        reader.close()

    assert [d[1] for d in callback.deliveries] == [0, 1, 2], "three deliveries, then the DLQ"
    assert record.value() == b"hopeless"
    headers = dict(record.headers())
    assert headers[prop.RECONSUME_TIME] == b"3"
    assert headers[prop.RETRY_TOPIC] == topic.encode()
    assert headers[prop.ORIGIN_MESSAGE_ID] == msg_id.encode()
    assert headers[prop.UNIQ_KEY] == msg_id.encode()
    assert headers[prop.KEYS] == b"order-7"
    assert headers["color"] == b"red"
    assert prop.DELAY not in headers


def test_a_message_with_binary_headers_that_keeps_failing_reaches_the_dlq_with_its_bytes(
    short_kafka: Broker, forwarder, make_consumer, new_group
) -> None:
    """Spring writes ``kafka_dlt-original-offset`` as eight bytes: such a message is retried
    through the retry topic like any other (its headers read back byte for byte), reaches the
    dead-letter topic with them as bytes and the reason, and its queue's commits move on."""
    topic = topic_on(short_kafka)
    group = new_group()
    spring = b"\x00\x00\x00\x00\x00\x00\x01\xc8"
    seen: list[tuple[int, bytes, bytes]] = []

    def callback(message):  # type: ignore[no-untyped-def]
        if message.body != b"binary":
            return ConsumeStatus.CONSUME_SUCCESS
        seen.append((message.reconsume_times, message.get_property(SPRING), message.tags))
        return ConsumeStatus.RECONSUME_LATER

    make_consumer(group, topic, callback, bootstrap=short_kafka.bootstrap, max_reconsume_times=1)
    raw = clients.producer({"bootstrap.servers": short_kafka.bootstrap})
    headers = [(prop.UNIQ_KEY, b"BIN-1"), (SPRING, spring), (prop.TAGS, b"Tag\xfe")]
    raw.produce(naming.kafka_topic(topic), b"binary", partition=0, headers=headers)
    raw.produce(naming.kafka_topic(topic), b"after it", partition=0)
    assert raw.flush(30) == 0

    dlq = naming.dlq_topic(group)
    [record] = wait_until(
        lambda: read_committed(short_kafka.bootstrap, dlq, 1, timeout=2),
        timeout=60,
        what="the dead letter",
    )

    assert seen == [(0, spring, b"Tag\xfe"), (1, spring, b"Tag\xfe")], "two deliveries"
    dead = dict(record.headers())
    assert record.value() == b"binary"
    assert (dead[SPRING], dead[prop.TAGS], dead[prop.UNIQ_KEY]) == (spring, b"Tag\xfe", b"BIN-1")
    assert dead[prop.RECONSUME_TIME] == b"2"
    assert dead["rmq.dlq_reason"] == b"failed 2 deliveries (max reconsume times 1)"
    wait_until(
        lambda: committed_offsets(short_kafka.bootstrap, group, topic, 2)[0] == 2,
        timeout=10,
        what="the queue committed past both records",
    )


def test_a_level_above_the_highest_is_delivered_at_the_highest(
    short_kafka: Broker, forwarder, make_producer, make_consumer, new_group
) -> None:
    topic = topic_on(short_kafka)
    received: list = []
    make_consumer(
        new_group(),
        topic,
        lambda m: received.append(m) or ConsumeStatus.CONSUME_SUCCESS,
        bootstrap=short_kafka.bootstrap,
    )
    producer = make_producer(bootstrap=short_kafka.bootstrap)
    message = Message(topic)
    message.set_body("clamped")
    message.set_delay_time_level(99)
    sent_at = time.time_ns() // 1_000_000
    producer.send_sync(message)

    wait_until(lambda: received, timeout=60, what="the clamped message")
    assert received[0].store_timestamp - sent_at >= 2000, "delivered at level 4 (2 s)"
    assert received[0].get_property(prop.REAL_TOPIC) == topic.encode()
