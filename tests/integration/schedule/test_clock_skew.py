"""A broker whose clock is ahead of or behind the forwarder's: the delay starts at the broker's
store stamp and ends on the forwarder's clock, late by the skew when the stamp lies ahead.

Each test stamps a record on a real broker (LogAppendTime), then drives a forwarder on a
:class:`ManualClock` set so that the broker looks ``skew`` ms ahead (or behind).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka import Message as KafkaRecord
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from adapter import naming
from adapter.clock import ManualClock
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.exceptions import TopicLayoutError
from adapter.kafka import clients
from adapter.message import Message
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.envelope import scheduled
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.wire import codec
from tests.support import create_topic, read_committed, unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
LEVEL = 2
DELAY_MS = DelayLevels.parse().delay_ms(LEVEL)


def stamp_delayed(bootstrap: str, topic: str, body: str) -> int:
    """A delayed message of ``LEVEL`` for ``topic`` on SCHEDULE; the broker's store stamp."""
    message = Message(topic)
    message.set_body(body)
    record = scheduled(message, level=LEVEL, unique_key=unique("ID"), born_ms=0)
    producer = clients.producer({"bootstrap.servers": bootstrap})
    acks: list[KafkaRecord] = []
    producer.produce(
        SCHEDULE, codec.encode(record), partition=LEVEL - 1, on_delivery=lambda _, m: acks.append(m)
    )
    assert producer.flush(10) == 0
    [ack] = acks
    assert ack.error() is None
    kind, stamp = ack.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME, "the broker's clock stamped it"
    return int(stamp)


def forwarded(bootstrap: str, topic: str) -> int:
    return len(read_committed(bootstrap, topic, 1, timeout=3))


@pytest.mark.parametrize(
    "skew",
    [
        5_000,
        -5_000,
        # The edges of the rule, 13 s each: in `make test-long`, to keep `make test` near 15 min.
        *(pytest.param(skew, marks=pytest.mark.long) for skew in (5, 300_000, -5, -300_000)),
    ],
)
def test_a_broker_clock_ahead_or_behind_shifts_a_delay_by_at_most_the_skew(
    clock_kafka: str, skew: int
) -> None:
    """``skew`` > 0: the broker is ahead; < 0: behind."""
    topic = create_topic(clock_kafka, partitions=1)
    stored = stamp_delayed(clock_kafka, topic, "delayed")
    clock = ManualClock(stored - skew)
    config = ForwarderConfig(
        KafkaSettings(clock_kafka), worker_id=unique("skew"), max_wait_ms=100, prepare_ahead_ms=0
    )
    forwarder = ScheduleForwarder(config, clock=clock)
    # Ahead: the record looks stored in the future; it is due a delay after its stamp, late by
    # the skew. Behind: it looks older than it is; up to the skew early.
    wait = max(0, DELAY_MS + skew)
    try:
        if wait > 0:
            assert forwarder.drain() == 0
            clock.advance(wait - 1)
            assert forwarder.drain() == 0
            assert forwarded(clock_kafka, topic) == 0, f"not before {wait} ms on its clock"
            clock.advance(1)
        assert forwarder.drain() == 1
    finally:
        forwarder.close()
    [record] = read_committed(clock_kafka, topic, 1)
    assert record.value() == b"delayed"


def test_a_forwarder_clock_set_back_and_then_right_never_delivers_early(clock_kafka: str) -> None:
    """The chaos run's skew-worker: read while 5 s behind, due by the right clock after."""
    topic = create_topic(clock_kafka, partitions=1)
    stored = stamp_delayed(clock_kafka, topic, "delayed")
    clock = ManualClock(stored - 5_000)
    config = ForwarderConfig(
        KafkaSettings(clock_kafka), worker_id=unique("skew"), max_wait_ms=100, prepare_ahead_ms=0
    )
    forwarder = ScheduleForwarder(config, clock=clock)
    try:
        assert forwarder.drain() == 0, "read while the clock is behind"
        clock.advance(5_000 + DELAY_MS - 1)  # set right, then 1 ms short of its due time
        assert forwarder.drain() == 0
        assert forwarded(clock_kafka, topic) == 0, "not early by the right clock"
        clock.advance(1)
        assert forwarder.drain() == 1
    finally:
        forwarder.close()


@contextlib.contextmanager
def schedule_stamped_by_writers(bootstrap: str) -> Iterator[None]:
    """SCHEDULE with ``message.timestamp.type=CreateTime`` for the block (a topic made by hand)."""
    admin = clients.admin({"bootstrap.servers": bootstrap})

    def stamp(kind: str) -> None:
        entry = ConfigEntry(
            "message.timestamp.type", kind, incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ConfigResource.Type.TOPIC, SCHEDULE, incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    stamp("CreateTime")
    try:
        yield
    finally:
        stamp("LogAppendTime")


def test_a_forwarder_refuses_to_start_on_a_schedule_topic_its_writers_stamp(
    clock_kafka: str,
) -> None:
    config = ForwarderConfig(KafkaSettings(clock_kafka), worker_id=unique("stamps"))
    forwarder = ScheduleForwarder(config, clock=ManualClock())
    try:
        with (
            schedule_stamped_by_writers(clock_kafka),
            pytest.raises(TopicLayoutError, match="message.timestamp.type=CreateTime"),
        ):
            forwarder.start()
    finally:
        forwarder.close()
