"""The client under broker faults: a restart, and a broker frozen past the send timeout."""

from __future__ import annotations

from collections import Counter

import pytest

from adapter.client import SendStatus
from adapter.exceptions import ProducerSendSyncFailed
from tests.brokers import Broker, paused
from tests.support import Recorder, committed_offsets, create_topic, send, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def topic_on(broker: Broker) -> str:
    return create_topic(broker.bootstrap, 2, "Faults")


def test_a_consumer_survives_a_broker_restart_without_losing_or_repeating_committed_work(
    own_kafka: Broker, make_producer, make_consumer, new_group
) -> None:
    topic = topic_on(own_kafka)
    group = new_group()
    producer = make_producer(bootstrap=own_kafka.bootstrap)
    recorder = Recorder()
    make_consumer(group, topic, recorder, bootstrap=own_kafka.bootstrap)

    before = [f"before-{i}" for i in range(100)]
    for body in before:
        send(producer, topic, body)
    wait_until(lambda: len(recorder) >= len(before), timeout=60, what="the first batch")
    wait_until(
        lambda: sum(committed_offsets(own_kafka.bootstrap, group, topic, 2).values()) == 100,
        timeout=30,
        what="the first batch to be committed",
    )

    own_kafka.restart()

    after = [f"after-{i}" for i in range(100)]
    for body in after:
        send(producer, topic, body)
    wait_until(
        lambda: set(recorder.bodies) >= {b.encode() for b in after},
        timeout=120,
        what="the second batch after the restart",
    )

    counts = Counter(body.decode() for body in recorder.bodies)
    assert set(counts) == set(before) | set(after), "nothing lost, nothing invented"
    assert all(counts[body] == 1 for body in before), "committed work is not delivered again"


def test_a_send_to_a_frozen_broker_fails_with_a_clear_error_and_works_after(
    own_kafka: Broker, make_producer
) -> None:
    topic = topic_on(own_kafka)
    producer = make_producer(bootstrap=own_kafka.bootstrap, timeout=2000)
    send(producer, topic, "warm-up")

    with paused(own_kafka), pytest.raises(ProducerSendSyncFailed, match=topic):
        send(producer, topic, "while frozen")

    assert send(producer, topic, "after the thaw").status == SendStatus.OK
