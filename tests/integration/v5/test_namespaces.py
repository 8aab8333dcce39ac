"""Two 5.x applications in two namespaces, with the same topic and group names: each sends to
and receives from its own ``<namespace>%<topic>``, and sees nothing of the other's."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic

from adapter import naming
from adapter.v5 import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def test_two_namespaces_with_the_same_names_see_nothing_of_each_other(
    system_topics: str, admin
) -> None:
    topic, group = unique("NsOrders"), unique("GID_ns")
    spaces = ("shopA", "shopB")
    wanted = [NewTopic(naming.kafka_topic(naming.with_namespace(s, topic)), 1) for s in spaces]
    for future in admin.create_topics(wanted).values():
        future.result(timeout=30)
    for space in spaces:
        producer = Producer(ClientConfiguration(system_topics, Credentials(), space), (topic,))
        producer.startup()
        try:
            message = Message()
            message.topic, message.body = topic, f"for {space}".encode()
            producer.send(message)
        finally:
            producer.shutdown()
    for space in spaces:
        consumer = SimpleConsumer(
            ClientConfiguration(system_topics, Credentials(), space),
            group,
            {topic: FilterExpression("*")},
            await_duration=2,
        )
        consumer.startup()
        try:
            got = wait_until(lambda c=consumer: c.receive(16, 10), timeout=60, what=space)
            for message in got:
                consumer.ack(message)
            assert [(m.body, m.topic, m.namespace) for m in got] == [
                (f"for {space}".encode(), topic, space)
            ]
            assert consumer.consumer_group == group
            assert consumer.receive(16, 10) == [], "the other namespace's message never comes"
        finally:
            consumer.shutdown()
