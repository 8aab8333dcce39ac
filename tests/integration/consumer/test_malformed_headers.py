"""Records on a real topic with malformed RocketMQ headers: the consumer never crashes.

Any Kafka client can write to a real topic, so a PushConsumer meets records whose RocketMQ
properties are not what the adapter writes: bytes that are not UTF-8 where RocketMQ has Java
strings, numbers that are not numbers, null and duplicate headers, a forged retry topic, a
header of 20 KiB. Hypothesis draws them (derandomized, so CI runs the same cases each time).
Every record must reach the callback; its failed first delivery must come back through
``%RETRY%<group>`` and then succeed, or, when its ``RECONSUME_TIME`` already reads as the
maximum (16) or more, go to ``%DLQ%<group>``, as RocketMQ does; nothing is lost and the
consumer keeps consuming.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import naming
from adapter import properties as prop
from adapter.client import ConsumeStatus
from adapter.config import ENV_DELAY_LEVELS
from adapter.consumer.config import DEFAULT_MAX_RECONSUME_TIMES
from adapter.delay import DelayLevels
from adapter.kafka import clients
from tests.brokers import Broker
from tests.support import (
    ON_A_BROKER,
    create_topic,
    init_system_topics,
    read_committed,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SHORT = "1s 1s 1s 2s"
RECORDS = 12

ROCKETMQ_KEYS = (
    prop.TAGS,
    prop.KEYS,
    prop.UNIQ_KEY,
    prop.DELAY,
    prop.RECONSUME_TIME,
    prop.RETRY_TOPIC,
    prop.ORIGIN_MESSAGE_ID,
    prop.MAX_RECONSUME_TIMES,
    prop.TRANSACTION_PREPARED,
    prop.TRANSACTION_ID,
    prop.BORN_TIMESTAMP,
    prop.TIMER_DELIVER_MS,
)
bad_values = st.one_of(
    st.binary(max_size=24),
    st.sampled_from([b"\xff\xfe\xfd", b"-1", b"99999999999999999999999", b"", b"%RETRY%x", b" "]),
    st.text(max_size=12).map(str.encode),
    st.none(),
    st.integers(20_000, 20_480).map(lambda n: b"\xff" * n),  # large, and not UTF-8
)
header_lists = st.lists(
    st.tuples(st.one_of(st.sampled_from(ROCKETMQ_KEYS), st.text(max_size=8)), bad_values),
    max_size=8,
)


@pytest.fixture(scope="module")
def short_kafka(own_kafka: Broker) -> Broker:
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse(SHORT))
    return own_kafka


@pytest.fixture
def forwarder(short_kafka: Broker, start_forwarder, monkeypatch: pytest.MonkeyPatch):
    """One forwarder for all of the test's examples (a function fixture is set up once)."""
    monkeypatch.setenv(ENV_DELAY_LEVELS, SHORT)
    return start_forwarder(bootstrap=short_kafka.bootstrap, levels=DelayLevels.parse(SHORT))


class FailsFirstDelivery:
    """Fails the first delivery of each body, accepts the next ones; counts everything."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: Counter[bytes] = Counter()
        self.reconsume_times_at_first: dict[bytes, int] = {}

    def __call__(self, message) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        # Every accessor the application may call must answer, whatever the headers hold.
        _ = (message.topic, message.id, message.tags, message.keys, message.delay_time_level)
        reconsume_times = message.reconsume_times
        with self.lock:
            self.reconsume_times_at_first.setdefault(message.body, reconsume_times)
            self.deliveries[message.body] += 1
            first = self.deliveries[message.body] == 1
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS


@ON_A_BROKER
@given(headers=st.lists(header_lists, min_size=RECORDS, max_size=RECORDS))
def test_records_with_malformed_rocketmq_headers_are_consumed_and_retried_without_a_crash(
    headers: list[list[tuple[str, bytes | None]]],
    short_kafka: Broker,
    forwarder,
    make_consumer,
) -> None:
    topic = create_topic(short_kafka.bootstrap, 2, "Malformed")
    group = unique("GID_malformed")
    callback = FailsFirstDelivery()
    consumer = make_consumer(group, topic, callback, bootstrap=short_kafka.bootstrap)

    raw = clients.producer({"bootstrap.servers": short_kafka.bootstrap})
    bodies = [f"record-{i}".encode() for i in range(RECORDS)]
    for body, record_headers in zip(bodies, headers, strict=True):
        raw.produce(naming.kafka_topic(topic), body, headers=record_headers)
    assert raw.flush(30) == 0

    wait_until(
        lambda: all(callback.deliveries[b] >= 1 for b in bodies),
        timeout=60,
        what="every record delivered once",
    )
    at_first = callback.reconsume_times_at_first
    dead = {b for b in bodies if at_first[b] >= DEFAULT_MAX_RECONSUME_TIMES}
    retried = set(bodies) - dead
    wait_until(
        lambda: all(callback.deliveries[b] >= 2 for b in retried),
        timeout=90,
        what="each failed record delivered again from the retry topic",
    )
    if dead:
        letters = read_committed(short_kafka.bootstrap, naming.dlq_topic(group), len(dead))
        assert {r.value() for r in letters} == dead, "past the maximum: the dead-letter topic"
    assert set(callback.deliveries) == set(bodies), "nothing else arrived"
    # counted once its callback returned, just after it recorded the delivery
    wait_until(lambda: consumer.stats.consumed >= len(retried), timeout=10, what="the count")
    assert consumer.stats.consumed == len(retried), "each retried record accepted once"
    assert all(callback.deliveries[b] == 1 for b in dead)
