"""Two applications in two namespaces, with the same topic and group names, through one
proxy: each sees only its own messages, on Kafka topics named ``<namespace>%<topic>``, as
RocketMQ names them."""

from __future__ import annotations

from typing import Any

import pytest

from adapter import naming
from tests.integration.proxy.conftest import RunningProxy
from tests.integration.proxy.test_simple_consumer import receive_until
from tests.integration.v5.test_namespaces import send_one_in_each
from tests.support import create_namespaced_topics, read_committed, unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150)]


def configuration(proxy: RunningProxy, namespace: str) -> Any:
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(proxy.endpoint, Credentials(), namespace)


def test_two_namespaces_with_the_same_names_see_nothing_of_each_other(
    proxy: RunningProxy, admin, kafka_bootstrap: str
) -> None:
    import rocketmq
    from rocketmq import FilterExpression, SimpleConsumer

    topic, group = unique("NsOrders"), unique("GID_ns")
    spaces = ("shopA", "shopB")
    create_namespaced_topics(admin, topic, spaces)
    send_one_in_each(rocketmq, proxy.endpoint, topic, spaces)
    for space in spaces:
        consumer = SimpleConsumer(
            configuration(proxy, space), group, {topic: FilterExpression("*")}, await_duration=3
        )
        consumer.startup()
        try:
            got = receive_until(consumer, 1)
            for message in got:
                consumer.ack(message)
            assert [(m.body, m.topic) for m in got] == [(f"for {space}".encode(), topic)]
            assert consumer.receive(16, 20) == [], "the other namespace's message never comes"
        finally:
            consumer.shutdown()
    stored = read_committed(kafka_bootstrap, naming.with_namespace("shopA", topic), 1, timeout=5)
    assert [r.value() for r in stored] == [b"for shopA"]
