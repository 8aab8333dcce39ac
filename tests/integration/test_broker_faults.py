"""The clients under broker faults: a restart, a broker frozen past the send timeout, and a
fast-path group cut off by a frozen broker."""

from __future__ import annotations

from collections import Counter

import pytest

from adapter.client import Message, SendStatus, TransactionStatus
from adapter.delay import DelayLevels
from adapter.exceptions import ProducerSendSyncFailed
from adapter.wire.records import TransactionDecision
from tests.brokers import Broker, paused
from tests.support import (
    Recorder,
    committed_offsets,
    create_topic,
    init_system_topics,
    read_committed,
    send,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def topic_on(broker: Broker) -> str:
    return create_topic(broker.bootstrap, 2, "Faults")


def retried_send(producer, topic: str, body: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``body`` was sent this time (a failure is for the caller to try again)."""
    try:
        send(producer, topic, body)
    except ProducerSendSyncFailed:
        return False
    return True


@pytest.mark.long  # half a minute: a broker stopped and started
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
    # The first send after a restart may time out while the partitions' leaders come back
    # (seen in CI): sent again, as an application does; a copy of it may then arrive twice.
    wait_until(lambda: retried_send(producer, topic, after[0]), timeout=60, what="a send")
    for body in after[1:]:
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


def test_a_fast_path_group_cut_off_by_a_frozen_broker_is_delivered_once_by_the_coordinator(
    own_kafka: Broker, start_coordinator, make_transaction_producer, new_group
) -> None:
    """The group's flush times out while the broker is frozen, so the group is abandoned and
    its decision handed to the coordinator as a plain END, while the group's own records (the
    message and its delivered END) may still be in flight and land when the broker wakes. They
    must never become visible: Kafka aborts their transaction (its timeout, or the lane's abort)
    and fences a late append to it; only the coordinator delivers the message."""
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse())
    topic = topic_on(own_kafka)
    start_coordinator(own_kafka.bootstrap, transaction_timeout_ms=1500, check_interval_ms=1000)
    producer = make_transaction_producer(
        new_group("PG"), lambda _m: TransactionStatus.COMMIT, bootstrap=own_kafka.bootstrap
    )
    committer = producer.fast_path
    assert committer is not None
    warm_up = Message(topic)
    warm_up.set_body(b"warm-up")
    producer.send_message_in_transaction(warm_up, lambda *_: TransactionStatus.COMMIT)
    assert producer.flush(60) == 0
    message = Message(topic)
    message.set_body(b"cut off")
    sent = producer.send_half(message)
    with paused(own_kafka):
        producer.end_half(sent, TransactionDecision.COMMIT)  # taken by the open group
        wait_until(lambda: committer.fell_back == 1, timeout=30, what="the group abandoned")
    records = read_committed(own_kafka.bootstrap, topic, 2, timeout=90)
    assert Counter(r.value() for r in records) == {b"warm-up": 1, b"cut off": 1}
