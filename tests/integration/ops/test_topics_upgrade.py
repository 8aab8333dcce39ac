"""``rmq-adapter topics init`` on the topics of an earlier release: a SCHEDULE_TOPIC_XXXX with
one partition per level only is given the partitions of the timers' fine hops, and its
delayed messages keep their levels."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from adapter import naming
from adapter.kafka import clients
from tests.brokers import Broker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


def partitions(bootstrap: str, topic: str) -> int:
    admin = clients.admin({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def test_a_schedule_topic_with_the_levels_only_grows_the_fine_hops_and_keeps_its_records(
    own_kafka: Broker,
) -> None:
    bootstrap = own_kafka.bootstrap
    admin = clients.admin({"bootstrap.servers": bootstrap})
    old = NewTopic(SCHEDULE, 18, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin.create_topics([old])[SCHEDULE].result(30)
    raw = clients.producer({"bootstrap.servers": bootstrap})
    raw.produce(SCHEDULE, b"parked by an earlier release", partition=17)
    assert raw.flush(10) == 0

    init = subprocess.run(
        [sys.executable, "-m", "adapter", "topics", "init", "--bootstrap", bootstrap],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert init.returncode == 0, init.stderr
    assert partitions(bootstrap, SCHEDULE) == 23
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": "upgrade-check"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(SCHEDULE, 17), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, 1), "level 18 keeps its record"
