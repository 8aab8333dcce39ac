"""Recalling timer messages against a real broker, where the handle or the recall topic is not
what the happy path expects: a recall topic that compacted, a handle altered or made up."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from adapter import naming
from adapter.delay import DelayLevels
from adapter.kafka import clients, retry
from adapter.kafka.topics import RECALLS
from adapter.v5.exception import BadRequestException, IllegalArgumentException
from tests.brokers import Broker
from tests.integration.schedule.test_timers import now_ms, timer
from tests.integration.v5.conftest import MakeV5Producer
from tests.support import create_topic, init_system_topics, read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

RECALL_TOPIC = naming.kafka_topic(naming.TIMER_RECALL_TOPIC)
QUICK_COMPACTION = {
    "min.compaction.lag.ms": "0",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
}
QUICK_CLEANER = {"log.cleaner.backoff.ms": "200"}


def alter(admin: AdminClient, resource: ConfigResource, settings: dict[str, str | None]) -> None:
    """Set (a value) or remove (None) the configs of ``resource``."""
    for name, value in settings.items():
        operation = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        resource.add_incremental_config(
            ConfigEntry(name, value or "", incremental_operation=operation)
        )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


@pytest.fixture
def quick_compaction(admin: AdminClient) -> Iterator[None]:
    """The recall topic compacts within seconds during the test (its own configs and the
    broker's cleaner back-off), and is set back afterwards."""
    brokers = sorted(admin.list_topics(timeout=10).brokers)
    topic = lambda: ConfigResource(ResourceType.TOPIC, RECALL_TOPIC)  # noqa: E731
    alter(admin, topic(), dict(QUICK_COMPACTION))
    for broker in brokers:
        alter(admin, ConfigResource(ResourceType.BROKER, str(broker)), dict(QUICK_CLEANER))
    try:
        yield
    finally:
        for broker in brokers:
            alter(
                admin,
                ConfigResource(ResourceType.BROKER, str(broker)),
                dict.fromkeys(QUICK_CLEANER),
            )
        alter(admin, topic(), {name: RECALLS.get(name) for name in QUICK_COMPACTION})


def recall_log(bootstrap: str, start: int) -> list[tuple[int, bytes | None]]:
    """The recall topic's records from ``start``: offset and key."""
    reader = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        reader.assign([TopicPartition(RECALL_TOPIC, 0, start)])
        found: list[tuple[int, bytes | None]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            record = reader.poll(0.5)
            if record is None:
                continue
            if record.error() is not None:
                break  # the end
            found.append((record.offset() or 0, record.key()))
        return found
    finally:
        reader.close()


def compacted(bootstrap: str, start: int) -> Callable[[], bool]:
    """A predicate: a canary key written twice after ``start`` has lost its first record to
    compaction, so every segment before it was cleaned. Each call writes a record, which rolls
    the active segment."""
    canary = unique("canary").encode()
    producer = clients.producer({"bootstrap.servers": bootstrap})
    for value in (b"first", None):
        producer.produce(RECALL_TOPIC, value, key=canary, partition=0)
    assert producer.flush(10) == 0

    def check() -> bool:
        producer.produce(RECALL_TOPIC, None, key=unique("roll").encode(), partition=0)
        assert producer.flush(10) == 0
        return len([o for o, key in recall_log(bootstrap, start) if key == canary]) == 1

    return check


def edited(handle: str, **fields: str) -> str:
    """``handle`` with some of its space-separated fields replaced (topic, message_id,
    deliver_ms), the rest (its seal, if any) as it was."""
    text = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
    parts = text.split(" ")
    for name, value in fields.items():
        parts[{"topic": 1, "message_id": 2, "deliver_ms": 3}[name]] = value
    return base64.urlsafe_b64encode(" ".join(parts).encode()).decode().rstrip("=")


def end_offset(bootstrap: str) -> int:
    """The recall topic's end offset (asked again while its leader is being elected)."""
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("meta")})
    try:
        return retry.keep_trying(
            lambda: consumer.get_watermark_offsets(TopicPartition(RECALL_TOPIC, 0), timeout=10)[1],
            when=lambda exc: isinstance(exc, KafkaException),
            every_s=0.2,
            for_s=20,
        )
    finally:
        consumer.close()


def test_a_delivered_timer_recalled_twice_is_refused_twice_though_the_log_compacted(
    make_v5_producer: MakeV5Producer,
    system_topics: str,
    start_forwarder,
    new_topic,
    quick_compaction: None,
) -> None:
    topic = new_topic(partitions=1)
    producer = make_v5_producer()
    start_forwarder()
    start = end_offset(system_topics)
    receipt = producer.send(timer(topic, "delivered", now_ms() + 300))
    read_committed(system_topics, topic, 1, timeout=30)

    with pytest.raises(BadRequestException, match="delivered already"):
        producer.recall_message(topic, str(receipt.recall_handle))
    wait_until(compacted(system_topics, start), timeout=60, what="the recall log compacted")

    with pytest.raises(BadRequestException, match="delivered already"):
        producer.recall_message(topic, str(receipt.recall_handle))
    assert len(read_committed(system_topics, topic, 1, timeout=2)) == 1


def test_an_altered_or_made_up_recall_handle_is_refused_and_writes_nothing(
    make_v5_producer: MakeV5Producer, own_kafka: Broker
) -> None:
    """Refused before anything reaches the recall topic, so no timer can be cancelled by it.
    (On a broker of its own, where nothing else writes that topic.)"""
    bootstrap = own_kafka.bootstrap
    init_system_topics(bootstrap, DelayLevels.parse())
    mine, theirs = create_topic(bootstrap, 1, "Mine"), create_topic(bootstrap, 1, "Theirs")
    producer = make_v5_producer(bootstrap=bootstrap)
    due = now_ms() + 60_000
    own = producer.send(timer(mine, "mine", due))
    other = producer.send(timer(theirs, "theirs", due))
    handle = str(own.recall_handle)
    forged = {
        "another topic's timer": (mine, edited(handle, message_id=other.message_id)),
        "a later deliver time": (mine, edited(handle, deliver_ms=str(due + 3_600_000))),
        "a message never sent here": (mine, edited(handle, message_id="7F00000100" + "A" * 22)),
        "its own handle moved to the other topic": (theirs, edited(handle, topic=theirs)),
    }
    before = end_offset(bootstrap)

    def accepted(topic: str, bad: str) -> bool:
        try:
            producer.recall_message(topic, bad)
        except IllegalArgumentException:
            return False
        return True

    assert [what for what, (topic, bad) in forged.items() if accepted(topic, bad)] == []
    with pytest.raises(IllegalArgumentException, match="not issued by this Kafka cluster"):
        producer.recall_message(*forged["a later deliver time"])
    assert end_offset(bootstrap) == before, "no RECALL was written"

    producer.recall_message(mine, handle)  # the real handle still works, and writes its RECALL
    assert end_offset(bootstrap) > before
