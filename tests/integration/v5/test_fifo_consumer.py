"""The FIFO ``SimpleConsumer`` on a real broker: three message groups sent in order, one
message of group A not acked at its first delivery; B and C go on and complete meanwhile, A's
rest comes only after the lapsed one came back (attempt 2) and was acked; a second consumer of
the group started midway takes partitions, and each group's order still holds; a message past
its max attempts goes to the dead-letter topic and its group goes on; a 2.0 sharding key is a
message group too; a queue's next consumer keeps its acks, attempts and invisible durations;
messages a tag filter skips hold nothing back; threads of two consumers keep each group's order."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from adapter import naming
from adapter.client import Message as LegacyMessage
from adapter.client import Producer as LegacyProducer
from adapter.producer.routing import queue_for_sharding_key
from adapter.v5 import FilterExpression, Message, Producer
from adapter.v5.exception import BadRequestException
from adapter.v5.fifo_consumer import FifoSimpleConsumer
from tests.integration.v5.conftest import MakeSimpleConsumer
from tests.support import read_committed, unique, wait_until

pytestmark = pytest.mark.timeout(240)

PER_GROUP = 10
INVISIBLE_S = 5


def fifo_consumer(
    make: MakeSimpleConsumer, group: str, topic: str, **extensions: Any
) -> FifoSimpleConsumer:
    """A started ``FifoSimpleConsumer`` of ``topic`` (long polling 1 s)."""
    consumer = make(group, {topic: FilterExpression()}, 1, kind=FifoSimpleConsumer, **extensions)
    assert isinstance(consumer, FifoSimpleConsumer)
    return consumer


def three_groups() -> tuple[str, str, str]:
    """Names for message groups A and B that share one of two queues, and C on the other."""
    names = [unique(letter) for letter in "ABCDEFGH" * 4]
    queue = {name: queue_for_sharding_key(name, 2) for name in names}
    a = names[0]
    b = next(n for n in names[1:] if queue[n] == queue[a])
    c = next(n for n in names[1:] if queue[n] != queue[a])
    return a, b, c


def send(producer: Producer, topic: str, groups: tuple[str, ...], indexes: range) -> None:
    for i in indexes:
        for group in groups:
            message = Message()
            message.topic = topic
            message.body = f"{group}/{i}".encode()
            message.message_group = group
            producer.send(message)


@dataclass
class Log:
    """What the consumers saw: every delivery, and every ack Kafka's side took, in order."""

    deliveries: list[tuple[str, int]] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    refused: int = 0

    def order_of(self, group: str) -> list[int]:
        return [int(body.split("/")[1]) for body in self.acked if body.startswith(f"{group}/")]

    def when_delivered(self, body: str, attempt: int) -> int:
        return self.deliveries.index((body, attempt))


def receive_and_ack(
    consumer: FifoSimpleConsumer, log: Log, keep: Callable[[str, int], bool] = lambda b, a: False
) -> int:
    """One receive; acks everything but what ``keep`` holds back; how many it received."""
    got = consumer.receive(8, INVISIBLE_S)
    for message in got:
        body = bytes(message.body).decode()
        log.deliveries.append((body, int(message.delivery_attempt or 0)))
        if keep(body, int(message.delivery_attempt or 0)):
            continue
        try:
            consumer.ack(message)
        except BadRequestException:  # its queue moved to the other consumer meanwhile
            log.refused += 1
        else:
            log.acked.append(body)
    return len(got)


def members_with_partitions(admin: AdminClient, group: str) -> int:
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return sum(1 for m in described.members if m.assignment.topic_partitions)


def test_a_lapsed_message_holds_back_only_its_own_group_and_a_second_consumer_keeps_order(
    new_topic: Callable[..., str],
    make_v5_producer: Callable[..., Producer],
    make_simple_consumer: MakeSimpleConsumer,
    new_group: Callable[[], str],
    admin: AdminClient,
) -> None:
    topic = new_topic(2)
    group = new_group()
    a, b, c = three_groups()
    producer = make_v5_producer()
    send(producer, topic, (a, b, c), range(PER_GROUP))
    first = fifo_consumer(make_simple_consumer, group, topic)
    log = Log()
    lapsing = f"{a}/2"

    deadline = time.monotonic() + 60
    while len(log.acked) < 3 * PER_GROUP and time.monotonic() < deadline:
        receive_and_ack(first, log, keep=lambda body, attempt: body == lapsing and attempt == 1)

    assert sorted(log.acked) == sorted(f"{g}/{i}" for g in (a, b, c) for i in range(PER_GROUP))
    came_back = log.when_delivered(lapsing, 2)
    assert log.when_delivered(lapsing, 1) < came_back
    assert all(log.acked.index(f"{g}/{PER_GROUP - 1}") < came_back for g in (b, c))
    assert log.when_delivered(f"{a}/3", 1) > came_back
    assert [attempt for body, attempt in log.deliveries if body != lapsing] == [1] * (
        3 * PER_GROUP - 1
    )

    # A second consumer of the group, started midway, takes a queue; order still holds.
    send(producer, topic, (a, b, c), range(PER_GROUP, PER_GROUP + 5))
    wait_until(lambda: receive_and_ack(first, log), timeout=30, what="the next messages")
    second = fifo_consumer(make_simple_consumer, group, topic)
    wait_until(lambda: members_with_partitions(admin, group) == 2, timeout=60, what="two members")
    by_second = Log()
    send(producer, topic, (a, b, c), range(PER_GROUP + 5, 2 * PER_GROUP))
    deadline = time.monotonic() + 60
    while len(log.acked) < 6 * PER_GROUP and time.monotonic() < deadline:
        receive_and_ack(first, log)
        got = len(by_second.acked)
        receive_and_ack(second, by_second)
        log.acked.extend(by_second.acked[got:])

    assert by_second.acked, "the second consumer took no queue"
    for g in (a, b, c):
        assert log.order_of(g) == list(range(2 * PER_GROUP)), g
    assert first.receive(8, INVISIBLE_S) == []
    assert second.receive(8, INVISIBLE_S) == []


def test_a_message_past_its_max_attempts_goes_to_the_dead_letter_topic_and_its_group_goes_on(
    new_topic: Callable[..., str],
    make_v5_producer: Callable[..., Producer],
    make_simple_consumer: MakeSimpleConsumer,
    new_group: Callable[[], str],
    system_topics: str,
) -> None:
    topic = new_topic(1)
    group = new_group()
    send(make_v5_producer(), topic, ("order-7",), range(3))
    consumer = fifo_consumer(make_simple_consumer, group, topic, max_attempts=2)
    seen: list[tuple[str, int]] = []

    def next_one() -> list[Message]:
        got = consumer.receive(8, 1)
        seen.extend((bytes(m.body).decode(), int(m.delivery_attempt or 0)) for m in got)
        return got

    wait_until(next_one, timeout=30, what="the first delivery")  # not acked
    wait_until(next_one, timeout=30, what="the second delivery")  # not acked either
    [after] = wait_until(next_one, timeout=30, what="the next message of the group")
    consumer.ack(after)

    assert seen == [("order-7/0", 1), ("order-7/0", 2), ("order-7/1", 1)]
    [dead] = read_committed(system_topics, naming.dlq_topic(group), expected=1, timeout=20)
    assert dead.value() == b"order-7/0"


def test_a_2_0_sharding_key_is_the_message_group_of_its_messages(
    new_topic: Callable[..., str],
    make_producer: Callable[..., LegacyProducer],
    make_simple_consumer: MakeSimpleConsumer,
    new_group: Callable[[], str],
) -> None:
    topic = new_topic(1)
    producer = make_producer()
    for i in range(2):
        for key in ("order-1", "order-2"):
            message = LegacyMessage(topic)
            message.set_body(f"{key}/{i}".encode())
            producer.send_orderly_with_sharding_key(message, key)
    consumer = fifo_consumer(make_simple_consumer, new_group(), topic)

    first = wait_until(lambda: consumer.receive(8, 30), timeout=30, what="the first messages")

    assert sorted(bytes(m.body).decode() for m in first) == ["order-1/0", "order-2/0"]
    assert consumer.receive(8, 30) == []  # each key's next waits for its first to be acked
    consumer.ack(first[0])
    [after] = wait_until(lambda: consumer.receive(8, 30), timeout=30, what="the next message")
    assert bytes(after.body).decode() == bytes(first[0].body).decode().replace("/0", "/1")
    consumer.ack(first[1])
    consumer.ack(after)


def test_the_next_consumer_of_a_queue_keeps_its_acks_attempts_and_invisible_durations(
    new_topic: Callable[..., str],
    make_v5_producer: Callable[..., Producer],
    make_simple_consumer: MakeSimpleConsumer,
    new_group: Callable[[], str],
) -> None:
    topic, group = new_topic(1), new_group()
    send(make_v5_producer(), topic, ("A", "B"), range(2))
    first = fifo_consumer(make_simple_consumer, group, topic)
    log = Log()
    held_until = time.monotonic() + INVISIBLE_S
    wait_until(lambda: receive_and_ack(first, log, keep=lambda body, _a: body == "A/0"), timeout=30)
    wait_until(lambda: receive_and_ack(first, log), timeout=30, what="B/1")
    assert [body for body, _attempt in log.deliveries] == ["A/0", "B/0", "B/1"]
    second = fifo_consumer(make_simple_consumer, group, topic)

    first.shutdown(wait_for_held=False)  # A/0 still held: its queue goes to the second

    [again] = wait_until(lambda: second.receive(8, INVISIBLE_S), timeout=60, what="A/0 again")
    assert (bytes(again.body), again.delivery_attempt) == (b"A/0", 2)
    assert time.monotonic() >= held_until - 0.5, "shown before its invisible duration ended"
    second.ack(again)
    [after] = wait_until(lambda: second.receive(8, INVISIBLE_S), timeout=30, what="A/1")
    assert (bytes(after.body), after.delivery_attempt) == (b"A/1", 1)
    second.ack(after)
    assert second.receive(8, INVISIBLE_S) == []  # B/0 and B/1 were acked: not delivered again


def test_a_message_the_tag_filter_skips_does_not_hold_back_its_group(
    new_topic: Callable[..., str],
    make_v5_producer: Callable[..., Producer],
    make_simple_consumer: MakeSimpleConsumer,
    new_group: Callable[[], str],
) -> None:
    topic = new_topic(1)
    producer = make_v5_producer()
    for i, tag in enumerate(["Paid", "Draft", "Paid", "Draft", "Paid"]):
        message = Message()
        message.topic, message.body, message.tag = topic, f"order/{i}".encode(), tag
        message.message_group = "order"
        producer.send(message)
    consumer = make_simple_consumer(
        new_group(), {topic: FilterExpression("Paid")}, 1, kind=FifoSimpleConsumer
    )
    bodies = []

    for _ in range(3):
        [got] = wait_until(lambda: consumer.receive(8, INVISIBLE_S), timeout=30, what="Paid")
        bodies.append(bytes(got.body).decode())
        consumer.ack(got)

    assert bodies == ["order/0", "order/2", "order/4"]
    assert consumer.filtered == 2


def test_threads_of_two_consumers_that_sometimes_let_a_message_lapse_keep_every_group_in_order(
    new_topic: Callable[..., str],
    make_v5_producer: Callable[..., Producer],
    make_simple_consumer: MakeSimpleConsumer,
    new_group: Callable[[], str],
) -> None:
    topic, group = new_topic(2), new_group()
    groups = tuple(f"order-{n}" for n in range(4))
    send(make_v5_producer(), topic, groups, range(8))
    consumers = [fifo_consumer(make_simple_consumer, group, topic) for _ in range(2)]
    acked: list[str] = []
    ack_lock = threading.Lock()
    deadline = time.monotonic() + 90

    def work(consumer: FifoSimpleConsumer, seed: int) -> None:
        chance = random.Random(seed)
        while len(acked) < len(groups) * 8 and time.monotonic() < deadline:
            for message in consumer.receive(4, 2):
                if chance.random() < 0.15:
                    continue  # lapses: back after 2 s with the next attempt
                with ack_lock:  # an ack and its record together: the log is in ack order
                    try:
                        consumer.ack(message)
                    except BadRequestException:
                        continue  # its queue moved meanwhile: delivered again there
                    acked.append(bytes(message.body).decode())

    threads = [
        threading.Thread(target=work, args=(consumer, seed))
        for seed, consumer in enumerate(consumers * 2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(100)

    for g in groups:
        assert [int(b.split("/")[1]) for b in acked if b.startswith(f"{g}/")] == list(range(8))
