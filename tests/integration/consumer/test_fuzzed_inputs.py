"""Fuzzed consumer inputs through all three consumers: every message ends consumed or in the
dead-letter topic, and the queue's commits move past it.

Any Kafka client can write a real topic, so a consumer meets arbitrary header bytes (null,
repeated, not UTF-8, RocketMQ's own names with nonsense values), keys and bodies. Hypothesis
draws five such records per example (derandomized, so CI runs the same cases), and a callback
fails each a drawn number of times before it succeeds. Through the 2.0 ``PushConsumer``
(retries through ``%RETRY%<group>``, short delay levels), the 5.x ``PushConsumer`` (on the share
group, back after the short delay levels) and the 5.x ``SimpleConsumer`` (a failure goes back at
once), each record must be consumed exactly when it has deliveries left for its failures, else
reach ``%DLQ%<group>`` with its headers' bytes, and never both; the group's committed offsets
reach the end of the topic, or, on the share group, nothing comes back.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import TopicPartition
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapter import naming
from adapter import properties as prop
from adapter.client import ConsumeStatus
from adapter.config import ENV_DELAY_LEVELS
from adapter.delay import DelayLevels
from adapter.kafka import clients
from adapter.message import ReceivedMessage
from adapter.v5 import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    SimpleConsumer,
)
from adapter.v5 import Message as V5Message
from adapter.v5 import PushConsumer as V5PushConsumer
from tests.brokers import Broker
from tests.support import (
    ON_A_BROKER,
    committed_offsets,
    create_topic,
    init_system_topics,
    read_committed_all_there,
    shut_down_after,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.long, pytest.mark.timeout(300)]

SHORT = "1s 1s 1s 2s"
MAX_RECONSUME = 2
"""Three deliveries through the retry topic (and three attempts on the share group)."""
ID = "fuzz-id"
RECORDS = 5
SYSTEM = prop.RESERVED | {prop.DELAY, prop.TIMER_DELIVER_MS, "rmq.dlq_reason"}
FUZZ = settings(ON_A_BROKER, max_examples=2)

names = st.one_of(
    st.sampled_from(sorted(prop.RESERVED | {prop.DELAY, "kafka_dlt-original-offset"})),
    st.sampled_from(["rmq.bytes.x", "rmq.bytes.TAGS", "rmq.dlq_reason"]),
    st.text(min_size=1, max_size=8),
).filter(lambda name: name != ID)
values = st.one_of(
    st.binary(max_size=16),
    st.sampled_from([b"\xff\xfe", b"-1", b"99999999999999999999", b"", b"%RETRY%x", b"3"]),
    st.none(),
)


@dataclass(frozen=True)
class Case:
    headers: list[tuple[str, bytes | None]]
    key: bytes | None
    body: bytes
    failures: int


cases = st.lists(
    st.builds(
        Case,
        headers=st.lists(st.tuples(names, values), max_size=6),
        key=st.one_of(st.none(), st.binary(max_size=8)),
        body=st.binary(max_size=32),
        failures=st.integers(0, MAX_RECONSUME + 1),
    ),
    min_size=RECORDS,
    max_size=RECORDS,
)


SPRING = [
    Case([("kafka_dlt-original-offset", b"\x00\x00\x01\xc8")], None, b"dead", MAX_RECONSUME + 1),
    Case([("TAGS", b"Tag\xfe"), ("k", None)], b"\xff", b"retried", 1),
    Case([], None, b"", 0),
    Case([(prop.RECONSUME_TIME, b"7"), ("x", b"\x80")], None, b"old", 1),
    Case([("rmq.bytes.y", b"bm90IGJ5dGVz")], b"k", b"plain", 0),
]
"""Always tried first: binary headers (as Spring writes them) on failing records."""


@pytest.fixture(scope="module")
def short_kafka(own_kafka: Broker) -> Broker:
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse(SHORT))
    return own_kafka


@pytest.fixture
def forwarder(short_kafka: Broker, start_forwarder, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_DELAY_LEVELS, SHORT)
    return start_forwarder(bootstrap=short_kafka.bootstrap, levels=DelayLevels.parse(SHORT))


class Tally:
    """Deliveries per record id; fails each record its drawn number of times."""

    def __init__(self, items: list[Case]) -> None:
        self.items = items
        self.lock = threading.Lock()
        self.deliveries: Counter[int] = Counter()
        self.consumed: Counter[int] = Counter()

    def deliver(self, fuzz_id: str) -> bool:
        """Count a delivery of ``fuzz_id``; True when this one succeeds."""
        number = int(fuzz_id)
        with self.lock:
            self.deliveries[number] += 1
            succeeds = self.deliveries[number] > self.items[number].failures
            if succeeds:
                self.consumed[number] += 1
        return succeeds


def write(bootstrap: str, topic: str, items: list[Case]) -> None:
    raw = clients.producer({"bootstrap.servers": bootstrap})
    for number, case in enumerate(items):
        headers = [*case.headers, (ID, str(number).encode())]
        raw.produce(naming.kafka_topic(topic), case.body, key=case.key, headers=headers)
    assert raw.flush(30) == 0


def reconsume_times(case: Case) -> int:
    """What the consumer reads as the record's reconsume times (its headers may say any)."""
    return ReceivedMessage(
        topic="T", kafka_topic="T", body=b"", queue_id=0, queue_offset=0, timestamp=0,
        append_time=False, headers=case.headers,
    ).reconsume_times  # fmt: skip


def check_outcome(bootstrap: str, group: str, tally: Tally, allowed: Callable[[Case], int]) -> None:
    """Each record consumed once when its failures fit in ``allowed`` deliveries, else dead-
    lettered once with its headers' bytes, never both."""
    dead_expected = {n for n, case in enumerate(tally.items) if case.failures >= allowed(case)}
    wait_until(
        lambda: all(
            tally.consumed[n] == 1 for n in range(len(tally.items)) if n not in dead_expected
        ),
        timeout=90,
        what="every record with deliveries left consumed",
    )
    letters = {}
    if dead_expected:
        found = wait_until(
            lambda: read_committed_all_there(
                bootstrap, naming.dlq_topic(group), len(dead_expected)
            ),
            timeout=60,
            what="the dead letters",
        )
        letters = {dict(r.headers() or [])[ID].decode(): r for r in found}
        assert len(letters) == len(found), "each dead-lettered once"
    assert set(letters) == {str(n) for n in dead_expected}
    assert not (set(tally.consumed) & dead_expected), "a dead letter was never consumed"
    for number, record in letters.items():
        case = tally.items[int(number)]
        assert record.value() == case.body
        kept = dict(record.headers() or [])
        for name, value in dict(case.headers).items():
            if value is not None and name not in SYSTEM and not name.startswith("rmq.bytes."):
                assert kept.get(name) == value, (number, name)


@FUZZ
@given(items=cases)
@example(items=SPRING)
def test_the_2_0_push_consumer_consumes_or_dead_letters_every_fuzzed_record(
    items: list[Case], short_kafka: Broker, forwarder, make_consumer
) -> None:
    topic, group = create_topic(short_kafka.bootstrap, 2, "Fuzzed"), unique("GID_fuzz")
    tally = Tally(items)

    def callback(message) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        _ = (message.topic, message.id, message.tags, message.keys, message.body)
        ok = tally.deliver(message.get_property(ID).decode())
        return ConsumeStatus.CONSUME_SUCCESS if ok else ConsumeStatus.RECONSUME_LATER

    make_consumer(
        group, topic, callback, bootstrap=short_kafka.bootstrap, max_reconsume_times=MAX_RECONSUME
    )
    write(short_kafka.bootstrap, topic, items)

    check_outcome(short_kafka.bootstrap, group, tally, through_the_retry_topic)
    commits_reach_the_end(short_kafka.bootstrap, group, topic)


class Listener(MessageListener):
    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def consume(self, message: V5Message) -> ConsumeResult:
        _ = (message.topic, message.message_id, message.tag, message.keys, message.body)
        ok = self.tally.deliver(message.properties[ID])
        return ConsumeResult.SUCCESS if ok else ConsumeResult.FAILURE


@pytest.fixture
def v5_push(short_kafka: Broker) -> Iterator[Callable[..., V5PushConsumer]]:
    consumers: list[V5PushConsumer] = []

    def make(group: str, topic: str, listener: MessageListener) -> V5PushConsumer:
        config = ClientConfiguration(short_kafka.bootstrap, Credentials())
        consumer = V5PushConsumer(
            config, group, listener, {topic: FilterExpression()},
            max_delivery_attempts=MAX_RECONSUME + 1,
        )  # fmt: skip
        consumer.startup()
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.shutdown()


@FUZZ
@given(items=cases)
@example(items=SPRING)
def test_the_5_x_push_consumer_consumes_or_dead_letters_every_fuzzed_record(
    items: list[Case], short_kafka: Broker, forwarder, v5_push
) -> None:
    """Its attempts are the share group's deliveries, whatever a record's headers say."""
    topic, group = create_topic(short_kafka.bootstrap, 2, "Fuzzed"), unique("GID_fuzz")
    tally = Tally(items)
    consumer = v5_push(group, topic, Listener(tally))
    write(short_kafka.bootstrap, topic, items)

    check_outcome(short_kafka.bootstrap, group, tally, lambda _case: MAX_RECONSUME + 1)
    settled = sum(tally.deliveries.values())
    time.sleep(3)
    assert sum(tally.deliveries.values()) == settled, "every record accepted: nothing back"
    assert consumer.stats.consumed + consumer.stats.dead_lettered == len(items)


@pytest.fixture
def simple(short_kafka: Broker) -> Iterator[Callable[..., SimpleConsumer]]:
    with shut_down_after() as keep:

        def make(group: str, topic: str) -> SimpleConsumer:
            config = ClientConfiguration(short_kafka.bootstrap, Credentials())
            consumer = keep(SimpleConsumer(
                config, group, {topic: FilterExpression()}, 1,
                lock_duration=15, max_attempts=MAX_RECONSUME + 1,
            ))  # fmt: skip
            consumer.startup()
            return consumer

        yield make


@FUZZ
@given(items=cases)
@example(items=SPRING)
def test_the_simple_consumer_consumes_or_dead_letters_every_fuzzed_record(
    items: list[Case], short_kafka: Broker, simple
) -> None:
    topic, group = create_topic(short_kafka.bootstrap, 2, "Fuzzed"), unique("GID_fuzz")
    tally = Tally(items)
    consumer = simple(group, topic)
    write(short_kafka.bootstrap, topic, items)
    stop = threading.Event()

    def receive() -> None:
        while not stop.is_set():
            for got in consumer.receive(8, 5):
                _ = (got.topic, got.message_id, got.tag, got.keys, got.body)
                if tally.deliver(got.properties[ID]):
                    consumer.ack(got)
                else:
                    consumer.change_invisible_duration(got, 0)  # failed: back at once

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    try:
        check_outcome(short_kafka.bootstrap, group, tally, lambda _case: MAX_RECONSUME + 1)
    finally:
        stop.set()
        receiver.join(30)
    settled = sum(tally.deliveries.values())
    time.sleep(2)
    assert consumer.receive(8, 5) == [], "every record accepted: nothing comes back"
    assert sum(tally.deliveries.values()) == settled


def through_the_retry_topic(case: Case) -> int:
    """Deliveries a record gets before the dead-letter topic: its reconsume times count up
    from what its headers say, and a failure at the maximum goes to the dead letters."""
    return max(MAX_RECONSUME - reconsume_times(case), 0) + 1


def commits_reach_the_end(bootstrap: str, group: str, topic: str) -> None:
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("ends")})
    try:
        ends = {
            partition: consumer.get_watermark_offsets(
                TopicPartition(naming.kafka_topic(topic), partition), timeout=10
            )[1]
            for partition in range(2)
        }
    finally:
        consumer.close()

    def reached() -> bool:
        """Every partition's commit at its end; an empty one (all five records may go to one
        partition: librdkafka's sticky partitioner) has nothing to commit and keeps none."""
        committed = committed_offsets(bootstrap, group, topic, 2)
        return all(at == ends[p] or (ends[p] == 0 and at < 0) for p, at in committed.items())

    wait_until(
        reached,
        timeout=20,
        what=f"the group's commits at the end of the topic {ends}",
    )
