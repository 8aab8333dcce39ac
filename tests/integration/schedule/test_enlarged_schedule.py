"""SCHEDULE_TOPIC_XXXX given a partition by hand while forwarders run: the partition no level
owns is left unread, said so, and the forwarder goes on delivering the levels.

On a broker of the module's own: the extra partition would make every later forwarder of the
session refuse to start (the partition count no longer matches the levels).
"""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import NewPartitions

from adapter import naming
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.kafka import clients
from adapter.message import Message
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.forwarder import ScheduleForwarder
from tests.brokers import Broker
from tests.support import (
    create_topic,
    init_system_topics,
    read_committed,
    running_workers,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
HOPS = HopTable.of(DelayLevels.parse())


def test_a_partition_added_to_schedule_by_hand_is_left_unread_and_the_levels_go_on(
    own_kafka: Broker, make_producer, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = own_kafka.bootstrap
    init_system_topics(bootstrap, DelayLevels.parse())
    topic = create_topic(bootstrap, partitions=1)
    # Metadata every second, so that the group sees the new partition soon (5 min by default).
    settings = KafkaSettings(bootstrap, {"topic.metadata.refresh.interval.ms": "1000"})
    config = ForwarderConfig(settings, worker_id=unique("enlarged"), max_wait_ms=100)
    message = Message(topic)
    message.set_body("due after the growth")
    message.set_delay_time_level(3)  # 10 s
    # Sent before: a producer refuses to send to a SCHEDULE whose partitions no longer match.
    make_producer(bootstrap=bootstrap).send_sync(message)
    with running_workers() as run:
        forwarder = run(ScheduleForwarder(config))
        wait_until(lambda: forwarder.assigned_once, timeout=60, what="the levels assigned")
        admin = clients.admin({"bootstrap.servers": bootstrap})
        grown = admin.create_partitions([NewPartitions(SCHEDULE, HOPS.partitions + 1)])
        for future in grown.values():
            future.result(timeout=30)
        wait_until(
            lambda: f"partition {HOPS.partitions}" in caplog.text, timeout=60, what="the warning"
        )
        [record] = read_committed(bootstrap, topic, 1)
        assert record.value() == b"due after the growth"
        assert forwarder.alive(within_s=5.0), "its loop still turns"
        assert not forwarder.failures.failing
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("no level" in line and "left unread" in line for line in errors), errors
