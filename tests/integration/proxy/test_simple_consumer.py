"""The official 5.x Python client's ``SimpleConsumer`` (unchanged) receives through the proxy:
tag filters, acks, a message not acked back after its invisible duration with its delivery
attempt + 1, a changed invisible duration, and an ack the proxy cannot settle refused."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.proxy.conftest import RunningProxy
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150)]


def send(proxy: RunningProxy, topic: str, tagged: list[tuple[str, str]]) -> dict[str, str]:
    """Messages (body, tag) through the proxy with the official producer; their ids by body."""
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(proxy.endpoint, Credentials()))
    producer.startup()
    ids = {}
    try:
        for body, tag in tagged:
            message = Message()
            message.topic, message.body, message.tag = topic, body.encode(), tag
            message.keys = f"key-{body}"
            message.add_property("shop", "north")
            ids[body] = producer.send(message).message_id
    finally:
        producer.shutdown()
    return ids


def official_consumer(proxy: RunningProxy, group: str, topic: str, tag: str = "*") -> Any:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(
        ClientConfiguration(proxy.endpoint, Credentials()),
        group,
        {topic: FilterExpression(tag)},
        await_duration=3,
    )
    consumer.startup()
    return consumer


def receive_until(consumer: Any, count: int, invisible: int = 20) -> list[Any]:
    got: list[Any] = []

    def enough() -> bool:
        got.extend(consumer.receive(16, invisible))
        return len(got) >= count

    wait_until(enough, timeout=90, interval=0.1, what=f"{count} messages")
    return got


def test_a_simple_consumer_receives_its_tag_s_messages_and_acks_them(
    proxy: RunningProxy, new_topic
) -> None:
    topic, group = new_topic(2, "Receive"), unique("GID_simple")
    ids = send(proxy, topic, [("a1", "TagA"), ("b1", "TagB"), ("a2", "TagA"), ("a3", "TagA")])
    consumer = official_consumer(proxy, group, topic, "TagA")
    try:
        got: list[Any] = []

        def acked_all() -> bool:
            # each acked as it comes, as applications do: a Kafka share consumer holding an
            # un-acked record fetches nothing more, and the group then needs another one
            for message in consumer.receive(16, 20):
                got.append(message)
                consumer.ack(message)
            return len(got) >= 3

        wait_until(acked_all, timeout=90, interval=0.1, what="a1, a2, a3")
        assert sorted(m.body.decode() for m in got) == ["a1", "a2", "a3"]
        for message in got:
            assert message.message_id == ids[message.body.decode()]
            assert message.tag == "TagA"
            assert message.keys == {f"key-{message.body.decode()}"}
            assert message.properties["shop"] == "north"
            assert message.delivery_attempt == 1
            assert message.topic == topic
        time.sleep(2)  # an acked message would be back by now if the ack had not been taken
        assert consumer.receive(16, 20) == [], "acked, and TagB filtered out for good"
    finally:
        consumer.shutdown()


def test_a_message_not_acked_comes_back_after_its_invisible_duration_with_attempt_two(
    proxy: RunningProxy, new_topic
) -> None:
    topic, group = new_topic(1, "Invisible"), unique("GID_simple")
    ids = send(proxy, topic, [("later", "T")])
    consumer = official_consumer(proxy, group, topic)
    try:
        [first] = receive_until(consumer, 1, invisible=2)
        taken = time.monotonic()
        [again] = receive_until(consumer, 1, invisible=20)
        assert time.monotonic() - taken >= 1.8, "not before its invisible duration"
        assert again.message_id == ids["later"] == first.message_id
        assert again.delivery_attempt == 2
        consumer.change_invisible_duration(again, 1)
        [third] = receive_until(consumer, 1, invisible=20)
        assert third.delivery_attempt == 3, "a changed invisible duration brings it back sooner"
        consumer.ack(third)
    finally:
        consumer.shutdown()


def test_an_ack_with_a_receipt_handle_this_proxy_did_not_give_is_refused(
    proxy: RunningProxy, new_topic
) -> None:
    from rocketmq.v5.exception import BadRequestException

    topic, group = new_topic(1, "Forged"), unique("GID_simple")
    send(proxy, topic, [("x", "T")])
    consumer = official_consumer(proxy, group, topic)
    try:
        [message] = receive_until(consumer, 1)
        message.receipt_handle = "not-a-handle"
        with pytest.raises(BadRequestException):
            consumer.ack(message)
    finally:
        consumer.shutdown()
