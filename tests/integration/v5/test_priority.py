"""Priority messages (RIP-80) on a real broker: a backlog of low and high priorities reaches a
5.x ``PushConsumer`` and a ``SimpleConsumer`` highs first, each priority in send order; a message
lands in its band; a ``SimpleConsumer`` receives every band."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import naming
from adapter.v5 import ConsumeResult, FilterExpression, Message, MessageListener
from tests.integration.v5.conftest import MakePushConsumer, MakeSimpleConsumer, MakeV5Producer
from tests.integration.v5.test_examples import records_with_ids
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

LOWS, HIGHS = 1000, 100


class InArrivalOrder(MessageListener):
    """Records (priority, body) of every delivery, in the order they arrive."""

    def __init__(self) -> None:
        self.arrived: list[tuple[int | None, bytes]] = []
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.arrived.append((message.priority, message.body or b""))
        return ConsumeResult.SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.arrived)


@pytest.fixture
def make_priority_topic(admin: AdminClient) -> Iterator[Callable[[int], str]]:
    """Factory: ``make_priority_topic(bands)``, a fresh topic made for priorities 0 to
    ``bands - 1``: the topic itself and a Kafka topic for each band above 0."""
    created: list[str] = []

    def make(bands: int) -> str:
        topic = unique("Prio")
        names = [naming.priority_topic(topic, band) for band in range(bands)]
        futures = admin.create_topics([NewTopic(name, 1, 1) for name in names])
        for future in futures.values():
            future.result(timeout=30)
        created.extend(names)
        wait_until(
            lambda: set(names) <= set(admin.list_topics(timeout=10).topics),
            timeout=30,
            what=f"the bands of {topic} in the metadata",
        )
        return topic

    yield make
    if created:
        admin.delete_topics(created, operation_timeout=30)


def prioritised(topic: str, body: bytes, priority: int) -> Message:
    message = Message()
    message.topic, message.body, message.priority = topic, body, priority
    return message


def test_a_backlog_s_highs_arrive_before_its_lows_each_priority_in_order(
    make_priority_topic,
    make_v5_producer: MakeV5Producer,
    make_push_consumer: MakePushConsumer,
    new_group,
) -> None:
    topic = make_priority_topic(3)  # bands 0, 1 (left empty) and 2
    producer = make_v5_producer(topic)
    lows = [producer.send_async(prioritised(topic, b"low %d" % i, 0)) for i in range(LOWS)]
    highs = [producer.send_async(prioritised(topic, b"high %d" % i, 9)) for i in range(HIGHS)]
    for future in lows + highs:
        future.result(timeout=30)

    listener = InArrivalOrder()
    make_push_consumer(
        new_group(), listener, {topic: FilterExpression()}, consumption_thread_count=1
    )
    wait_until(lambda: listener.count() >= LOWS + HIGHS, timeout=60, what="the whole backlog")

    arrived = listener.arrived
    assert [body for priority, body in arrived[:HIGHS]] == [b"high %d" % i for i in range(HIGHS)]
    assert {priority for priority, _ in arrived[:HIGHS]} == {9}
    assert [body for _, body in arrived[HIGHS:]] == [b"low %d" % i for i in range(LOWS)]
    assert len(arrived) == LOWS + HIGHS


@pytest.mark.long  # fifteen seconds: a member joins per band
def test_a_simple_consumer_receives_a_backlog_s_highs_before_its_lows(
    make_priority_topic,
    make_v5_producer: MakeV5Producer,
    make_simple_consumer: MakeSimpleConsumer,
    new_group,
) -> None:
    topic = make_priority_topic(3)
    producer = make_v5_producer(topic)
    lows = [producer.send_async(prioritised(topic, b"low %d" % i, 0)) for i in range(LOWS)]
    highs = [producer.send_async(prioritised(topic, b"high %d" % i, 9)) for i in range(HIGHS)]
    for future in lows + highs:
        future.result(timeout=30)
    consumer = make_simple_consumer(new_group(), {topic: FilterExpression()})

    arrived: list[bytes] = []

    def every_message() -> bool:
        for message in consumer.receive(32, 5):
            consumer.ack(message)
            arrived.append(message.body or b"")
        return len(arrived) >= LOWS + HIGHS

    wait_until(every_message, timeout=90, what="the whole backlog")
    assert arrived[:HIGHS] == [b"high %d" % i for i in range(HIGHS)]
    assert sorted(arrived[HIGHS:]) == sorted(b"low %d" % i for i in range(LOWS))


def test_a_priority_goes_to_the_highest_band_not_above_it(
    make_priority_topic, make_v5_producer: MakeV5Producer, system_topics: str
) -> None:
    topic = make_priority_topic(3)
    producer = make_v5_producer(topic)
    receipts = {p: producer.send(prioritised(topic, b"p%d" % p, p)) for p in (0, 1, 2, 7)}
    plain = Message()
    plain.topic, plain.body = topic, b"no priority"
    receipts[-1] = producer.send(plain)

    expected = {0: [0, -1], 1: [1], 2: [2, 7]}
    for band, priorities in expected.items():
        ids = {receipts[p].message_id for p in priorities}
        records = records_with_ids(system_topics, naming.priority_topic(topic, band), ids)
        assert len(records) == len(priorities)


def test_a_simple_consumer_receives_every_band_as_its_topic_s_messages(
    make_priority_topic,
    make_v5_producer: MakeV5Producer,
    make_simple_consumer: MakeSimpleConsumer,
    new_group,
) -> None:
    topic = make_priority_topic(3)
    producer = make_v5_producer(topic)
    for priority in (0, 1, 2):
        producer.send(prioritised(topic, b"p%d" % priority, priority))
    consumer = make_simple_consumer(new_group(), {topic: FilterExpression()})

    got: list[Message] = []

    def all_three() -> bool:
        for message in consumer.receive(10, 10):
            consumer.ack(message)
            got.append(message)
        return len(got) >= 3

    wait_until(all_three, timeout=60, what="a message of each band")
    assert sorted((m.priority, m.body, m.topic) for m in got) == [
        (p, b"p%d" % p, topic) for p in (0, 1, 2)
    ]
