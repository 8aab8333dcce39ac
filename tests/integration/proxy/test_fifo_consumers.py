"""A FIFO consumer group (``--fifo-groups``) through the proxy, with the official Python
``PushConsumer`` unchanged: the proxy tells it the group is FIFO, each message group arrives in
order, a failed message is retried (by the client, after its back-off, as RocketMQ's FIFO push
consumer does) before anything after it in its group, and every message is consumed once."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.integration.proxy.conftest import RunningProxy, StartProxy
from tests.integration.proxy.test_push_consumer import official_push_consumer
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

GROUPS = ("g1", "g2", "g3")
PER_GROUP = 6


def send_fifo(proxy: RunningProxy, topic: str) -> None:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(proxy.endpoint, Credentials()), (topic,))
    producer.startup()
    try:
        for i in range(PER_GROUP):
            for group in GROUPS:
                message = Message()
                message.topic, message.body = topic, f"{group}:{i}".encode()
                message.message_group = group
                producer.send(message)
    finally:
        producer.shutdown()


def test_a_fifo_push_consumer_gets_each_message_group_in_order_and_a_failed_one_first(
    start_proxy: StartProxy, new_topic
) -> None:
    topic, group = new_topic(2, "FifoPush"), unique("GID_fifo")
    proxy = start_proxy("--fifo-groups", group)
    send_fifo(proxy, topic)
    lock = threading.Lock()
    calls: list[tuple[str, int, int]] = []
    done: list[str] = []
    failed: set[tuple[str, int]] = set()

    def consume(message: Any) -> bool:
        name, index = message.body.decode().split(":")
        with lock:
            calls.append((name, int(index), message.delivery_attempt))
            if (name, index) == ("g2", "1") and ("g2", 1) not in failed:
                failed.add(("g2", 1))
                return False
            done.append(message.body.decode())
        return True

    with official_push_consumer(proxy, group, topic, consume):
        wait_until(lambda: len(done) >= len(GROUPS) * PER_GROUP, timeout=60, what="all")
    assert sorted(done) == sorted(f"{g}:{i}" for g in GROUPS for i in range(PER_GROUP))
    for name in GROUPS:
        order = [i for g, i, _ in calls if g == name]
        expected = [0, 1, 1, 2, 3, 4, 5] if name == "g2" else list(range(PER_GROUP))
        assert order == expected, f"{name} in order, its failed message again before the rest"
    assert len([i for g, i, _ in calls if (g, i) == ("g2", 1)]) == 2, "retried once, locally"
