"""Bad input gets a clear error before anything reaches Kafka."""

from __future__ import annotations

import pytest

from adapter.client import Message, Producer, PushConsumer
from adapter.config import ENV_DELAY_LEVELS
from adapter.exceptions import (
    InvalidNameError,
    ProducerSendOnewayFailed,
    ProducerSendSyncFailed,
    ProducerStartFailed,
    PushConsumerStartFailed,
    TagExpressionError,
)
from tests.support import unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(60)]


def message(topic: str, body: bytes = b"x") -> Message:
    m = Message(topic)
    m.set_body(body)
    return m


@pytest.mark.parametrize("topic", ["bad topic", "dots.are.not.rocketmq", "", "x" * 128, "ümlaut"])
def test_an_invalid_topic_name_is_refused_with_the_rule_it_breaks(
    make_producer, topic: str
) -> None:
    producer = make_producer()
    with pytest.raises(ProducerSendSyncFailed, match="topic"):
        producer.send_sync(message(topic))
    with pytest.raises(ProducerSendOnewayFailed, match="topic"):
        producer.send_oneway(message(topic))


def test_sending_to_a_system_topic_is_forbidden(make_producer) -> None:
    with pytest.raises(ProducerSendSyncFailed, match="forbidden"):
        make_producer().send_sync(message("RMQ_SYS_TRANS_HALF_TOPIC"))


def test_an_oversized_body_is_refused_before_sending(make_producer, new_topic) -> None:
    topic = new_topic()
    producer = make_producer(max_message_size=1024)
    with pytest.raises(ProducerSendSyncFailed, match="over max value, MAX: 1024"):
        producer.send_sync(message(topic, b"x" * 1025))
    assert producer.send_sync(message(topic, b"x" * 1024)).offset == 0


def test_the_default_max_message_size_is_four_mebibytes(make_producer, new_topic) -> None:
    topic = new_topic()
    producer = make_producer()
    with pytest.raises(ProducerSendSyncFailed, match="MAX: 4194304"):
        producer.send_sync(message(topic, b"x" * (4 * 1024 * 1024 + 1)))
    assert producer.send_sync(message(topic, b"x" * (4 * 1024 * 1024))).offset == 0


def test_an_empty_body_is_refused(make_producer, new_topic) -> None:
    with pytest.raises(ProducerSendSyncFailed, match="empty"):
        make_producer().send_sync(message(new_topic(), b""))


def test_a_malformed_tag_expression_is_refused_at_subscribe() -> None:
    consumer = PushConsumer(unique("GID"))
    for expression in ("TagA ||", "TagA | TagB", "* || TagA", "TagA || || TagB"):
        with pytest.raises(TagExpressionError, match="malformed tag expression"):
            consumer.subscribe("TopicTest", lambda m: None, expression)


def test_an_invalid_topic_name_is_refused_at_subscribe() -> None:
    with pytest.raises(InvalidNameError, match="illegal characters"):
        PushConsumer(unique("GID")).subscribe("no spaces", lambda m: None)


def test_start_without_a_subscription_raises_push_consumer_start_failed(
    kafka_bootstrap: str,
) -> None:
    consumer = PushConsumer(unique("GID"))
    consumer.set_name_server_address(kafka_bootstrap)
    with pytest.raises(PushConsumerStartFailed, match="no subscription"):
        consumer.start()


def test_an_invalid_group_name_fails_start(kafka_bootstrap: str) -> None:
    producer = Producer("bad group")
    producer.set_name_server_address(kafka_bootstrap)
    with pytest.raises(ProducerStartFailed, match="illegal characters"):
        producer.start()
    consumer = PushConsumer("bad/group")
    consumer.set_name_server_address(kafka_bootstrap)
    consumer.subscribe("TopicTest", lambda m: None)
    with pytest.raises(PushConsumerStartFailed, match="illegal characters"):
        consumer.start()


def test_sending_before_start_is_a_clear_error() -> None:
    with pytest.raises(ProducerSendSyncFailed, match="not started"):
        Producer(unique("PID")).send_sync(message("TopicTest"))


def test_a_bad_delay_level_table_is_a_clear_error_at_start(
    monkeypatch: pytest.MonkeyPatch, make_producer
) -> None:
    monkeypatch.setenv(ENV_DELAY_LEVELS, "1s 5x 10s")
    with pytest.raises(ProducerStartFailed, match="messageDelayLevel entry 2 is '5x'"):
        make_producer()


def test_a_delayed_send_refuses_a_schedule_topic_that_does_not_match_the_levels(
    system_topics: str, monkeypatch: pytest.MonkeyPatch, make_producer, new_topic
) -> None:
    monkeypatch.setenv(ENV_DELAY_LEVELS, "1s 2s")
    producer = make_producer()
    m = Message(new_topic())
    m.set_body("later")
    m.set_delay_time_level(1)
    with pytest.raises(
        ProducerSendSyncFailed, match="23 partitions but the delay level table needs 7"
    ):
        producer.send_sync(m)
