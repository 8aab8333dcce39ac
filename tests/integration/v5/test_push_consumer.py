"""The 5.x ``PushConsumer`` on a real broker, a ``SimpleConsumer`` with a listener: a message once
with its fields (also one the 2.0 client sent), a failure delivered again with
``delivery_attempt`` + 1, the dead-letter topic after the last attempt, tag filters, and FIFO
groups in order with a failing message holding back its own partition only."""

from __future__ import annotations

import threading
import time

import pytest

from adapter import naming
from adapter.kafka import clients
from adapter.producer.routing import queue_for_sharding_key
from adapter.v5 import (
    ConsumeResult,
    FilterExpression,
    FilterType,
    Message,
    MessageListener,
)
from tests.integration.v5.conftest import MakePushConsumer, MakeV5Producer
from tests.support import read_committed, send, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

EVERYTHING = FilterExpression()


class Recording(MessageListener):
    """Answers FAILURE for the bodies in ``fail`` as many times as given, SUCCESS otherwise,
    and records every delivery (body, delivery attempt, message group) in order."""

    def __init__(self, fail: dict[bytes, int] | None = None) -> None:
        self.fail = dict(fail or {})
        self.deliveries: list[tuple[bytes, int | None, str | None]] = []
        self.messages: list[Message] = []
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body or b""
        with self.lock:
            self.deliveries.append((body, message.delivery_attempt, message.message_group))
            self.messages.append(message)
            if self.fail.get(body, 0) > 0:
                self.fail[body] -= 1
                return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [body for body, _, _ in self.deliveries]


def message(topic: str, body: bytes, *, tag: str | None = None, group: str | None = None):  # type: ignore[no-untyped-def]
    out = Message()
    out.topic, out.body = topic, body
    if tag is not None:
        out.tag = tag
    if group is not None:
        out.message_group = group
    return out


def test_a_message_is_consumed_once_with_its_5x_fields(
    make_v5_producer: MakeV5Producer, make_push_consumer: MakePushConsumer, new_topic, new_group
) -> None:
    topic = new_topic(2)
    sent = message(topic, b"order 7", tag="Paid")
    sent.keys = "order-7"
    sent.add_property("amount", "12")
    receipt = make_v5_producer().send(sent)
    listener = Recording()
    make_push_consumer(new_group(), listener, {topic: EVERYTHING})

    wait_until(lambda: listener.deliveries, timeout=60, what="the message")
    time.sleep(2)  # a second delivery would have come by now

    assert listener.deliveries == [(b"order 7", 1, None)]
    got = listener.messages[0]
    assert (got.topic, got.tag, got.keys, got.properties) == (
        topic,
        "Paid",
        {"order-7"},
        {"amount": "12"},
    )
    assert got.message_id == receipt.message_id


def test_a_message_from_the_2_0_client_arrives_with_the_same_id_tag_keys_and_properties(
    make_producer, make_push_consumer: MakePushConsumer, new_topic, new_group
) -> None:
    topic = new_topic(2)
    sent = send(make_producer(), topic, "from 2.0", tags="Paid", keys="order-9", shop="north")
    listener = Recording()
    make_push_consumer(new_group(), listener, {topic: EVERYTHING})

    wait_until(lambda: listener.messages, timeout=60, what="the message at the 5.x consumer")

    got = listener.messages[0]
    assert (got.message_id, got.body, got.tag, got.keys) == (
        sent.msg_id,
        b"from 2.0",
        "Paid",
        {"order-9"},
    )
    assert got.properties == {"shop": "north"}
    assert got.delivery_attempt == 1


def test_a_failure_is_delivered_again_with_the_next_delivery_attempt(
    make_v5_producer: MakeV5Producer,
    make_push_consumer: MakePushConsumer,
    start_forwarder,
    new_topic,
    new_group,
) -> None:
    start_forwarder()
    topic = new_topic(2)
    make_v5_producer().send(message(topic, b"flaky"))
    listener = Recording(fail={b"flaky": 1})
    make_push_consumer(new_group(), listener, {topic: EVERYTHING})

    wait_until(lambda: len(listener.deliveries) >= 2, timeout=60, what="the second delivery")

    assert [(body, attempt) for body, attempt, _ in listener.deliveries] == [
        (b"flaky", 1),
        (b"flaky", 2),
    ]


def test_after_the_last_attempt_the_message_goes_to_the_group_s_dead_letter_topic(
    make_v5_producer: MakeV5Producer,
    make_push_consumer: MakePushConsumer,
    system_topics: str,
    new_topic,
    new_group,
) -> None:
    topic, group = new_topic(2), new_group()
    make_v5_producer().send(message(topic, b"poison"))
    listener = Recording(fail={b"poison": 99})
    make_push_consumer(group, listener, {topic: EVERYTHING}, max_delivery_attempts=1)

    dlq = naming.kafka_topic(naming.dlq_topic(group))
    admin = clients.admin({"bootstrap.servers": system_topics})
    wait_until(
        lambda: dlq in admin.list_topics(timeout=5).topics, timeout=60, what="the dead-letter topic"
    )
    dead = read_committed(system_topics, naming.dlq_topic(group), 1, timeout=60)

    assert [r.value() for r in dead] == [b"poison"]
    assert listener.bodies() == [b"poison"], "one attempt, then the dead-letter topic"


def test_a_tag_filter_delivers_only_the_matching_tags(
    make_v5_producer: MakeV5Producer, make_push_consumer: MakePushConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)
    producer = make_v5_producer()
    for n, tag in enumerate(["A", "B", "C", "A"]):
        producer.send(message(topic, f"{tag}{n}".encode(), tag=tag))
    listener = Recording()
    make_push_consumer(new_group(), listener, {topic: FilterExpression("A||C")})

    wait_until(lambda: len(listener.deliveries) >= 3, timeout=60, what="A0, C2 and A3")
    time.sleep(2)

    assert listener.bodies() == [b"A0", b"C2", b"A3"]


def test_a_sql92_filter_delivers_only_the_matching_properties_and_consumes_the_rest(
    make_v5_producer: MakeV5Producer, make_push_consumer: MakePushConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)
    producer = make_v5_producer()
    for body, amount, tag in ((b"big", "250", "A"), (b"small", "5", "A"), (b"other", "300", "B"),
                              (b"none", None, "A"), (b"huge", "1000", "A")):  # fmt: skip
        sent = message(topic, body, tag=tag)
        if amount is not None:
            sent.add_property("amount", amount)
        producer.send(sent)
    listener = Recording()
    sql = FilterExpression("amount > 100 AND TAGS = 'A'", FilterType.SQL)
    consumer = make_push_consumer(new_group(), listener, {topic: sql})

    wait_until(lambda: consumer.stats.filtered >= 3, timeout=60, what="3 messages filtered out")
    wait_until(lambda: len(listener.deliveries) >= 2, timeout=30, what="big and huge")

    assert listener.bodies() == [b"big", b"huge"]
    assert consumer.stats.filtered == 3


def groups_on_different_queues(queues: int) -> tuple[str, str]:
    names = [f"order-{n}" for n in range(100)]
    first = names[0]
    other = next(
        n
        for n in names
        if queue_for_sharding_key(n, queues) != queue_for_sharding_key(first, queues)
    )
    return first, other


def test_a_fifo_group_is_delivered_in_order_and_a_failure_holds_back_only_its_queue(
    make_v5_producer: MakeV5Producer, make_push_consumer: MakePushConsumer, new_topic, new_group
) -> None:
    topic = new_topic(2)
    slow, other = groups_on_different_queues(2)
    producer = make_v5_producer()
    for n in range(3):
        producer.send(message(topic, f"{slow}/{n}".encode(), group=slow))
        producer.send(message(topic, f"{other}/{n}".encode(), group=other))
    listener = Recording(fail={f"{slow}/0".encode(): 2})
    consumer = make_push_consumer(new_group(), listener, {topic: EVERYTHING}, fifo=True)

    wait_until(lambda: len(listener.deliveries) >= 8, timeout=60, what="every delivery")

    assert consumer.fifo
    slow_deliveries = [(b, a) for b, a, g in listener.deliveries if g == slow]
    assert slow_deliveries == [
        (f"{slow}/0".encode(), 1),
        (f"{slow}/0".encode(), 2),
        (f"{slow}/0".encode(), 3),
        (f"{slow}/1".encode(), 1),
        (f"{slow}/2".encode(), 1),
    ], "in order, the failing message retried in place"
    others = [b for b, _, g in listener.deliveries if g == other]
    assert others == [f"{other}/{n}".encode() for n in range(3)]
    first_slow_success = listener.deliveries.index((f"{slow}/0".encode(), 3, slow))
    last_other = listener.deliveries.index((f"{other}/2".encode(), 1, other))
    assert last_other < first_slow_success, "the other queue was not held back"
