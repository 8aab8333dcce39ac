"""Two 5.x applications in two namespaces, with the same topic and group names: each sends to
and receives from its own ``<namespace>%<topic>``, and sees nothing of the other's."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import pytest

from adapter import v5
from adapter.v5 import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
from tests.support import create_namespaced_topics, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def send_one_in_each(api: ModuleType, endpoints: str, topic: str, spaces: Sequence[str]) -> None:
    """Through ``api`` (``adapter.v5``, or the official ``rocketmq``: the same API), one
    message ``for <namespace>`` to ``topic`` in each namespace."""
    for space in spaces:
        producer = api.Producer(
            api.ClientConfiguration(endpoints, api.Credentials(), space), (topic,)
        )
        producer.startup()
        try:
            message = api.Message()
            message.topic, message.body = topic, f"for {space}".encode()
            producer.send(message)
        finally:
            producer.shutdown()


def test_two_namespaces_with_the_same_names_see_nothing_of_each_other(
    system_topics: str, admin
) -> None:
    topic, group = unique("NsOrders"), unique("GID_ns")
    spaces = ("shopA", "shopB")
    create_namespaced_topics(admin, topic, spaces)
    send_one_in_each(v5, system_topics, topic, spaces)
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
