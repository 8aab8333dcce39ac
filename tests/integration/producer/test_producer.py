"""The drop-in Producer against a real broker: round trips, headers, orderly sends."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from adapter import naming
from adapter.client import Message, Producer, SendStatus
from adapter.exceptions import ProducerSendSyncFailed
from adapter.kafka import clients
from tests.support import Recorder, create_topic, send, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def read_plain(bootstrap: str, topic: str, count: int) -> list:
    """Read ``count`` records with a plain confluent-kafka consumer (no adapter)."""
    consumer = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("plain"),
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([naming.kafka_topic(topic)])
    records: list = []
    try:
        wait_until(
            lambda: (
                records.extend(r for r in consumer.consume(100, 0.5) if r.error() is None)
                or len(records) >= count
            ),
            timeout=30,
            what=f"{count} records on {topic}",
        )
    finally:
        consumer.close()
    return records


def test_a_synchronous_send_round_trips_body_tags_keys_and_properties(
    make_producer: Callable[..., Producer], make_consumer, new_topic, new_group
) -> None:
    topic = new_topic()
    producer = make_producer()
    result = send(producer, topic, "hello", tags="TagA", keys="order-1 order-2", color="blue")
    assert result.status == SendStatus.OK
    assert len(result.msg_id) == 32
    assert result.offset == 0

    recorder = Recorder()
    make_consumer(new_group(), topic, recorder)
    wait_until(lambda: len(recorder) == 1, what="the message")
    received = recorder.messages[0]
    assert received.topic == topic
    assert received.body == b"hello"
    assert received.tags == b"TagA"
    assert received.keys == b"order-1 order-2"
    assert received.get_property("color") == b"blue"
    assert received["color"] == b"blue"
    assert received.get_property("missing") == b""
    assert received.id == result.msg_id
    assert received.queue_offset == result.offset
    assert received.reconsume_times == 0
    assert received.born_timestamp > 0


def test_a_plain_kafka_consumer_sees_the_body_and_the_properties_as_headers(
    kafka_bootstrap: str, make_producer, new_topic
) -> None:
    topic = new_topic(prefix="Plain%Name")  # a '%' in the name is encoded for Kafka
    result = send(make_producer(), topic, b"\x00binary", tags="TagB", keys="k1", who="me")
    [record] = read_plain(kafka_bootstrap, topic, 1)
    assert record.topic() == naming.kafka_topic(topic)
    assert "%" not in record.topic()
    assert record.value() == b"\x00binary"
    headers = dict(record.headers())
    assert headers == {
        "UNIQ_KEY": result.msg_id.encode(),
        "TAGS": b"TagB",
        "KEYS": b"k1",
        "who": b"me",
    }


def test_oneway_sends_all_arrive(kafka_bootstrap: str, make_producer, new_topic) -> None:
    topic = new_topic()
    producer = make_producer()
    for i in range(200):
        message = Message(topic)
        message.set_body(f"m{i}")
        producer.send_oneway(message)
    assert producer.flush() == 0
    records = read_plain(kafka_bootstrap, topic, 200)
    assert sorted(r.value() for r in records) == sorted(f"m{i}".encode() for i in range(200))
    assert producer.oneway_failures == 0


def test_orderly_sends_of_one_key_land_in_one_queue_in_send_order(
    kafka_bootstrap: str, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=4)
    producer = make_producer()
    results = {}
    for key in ("order-1", "order-2", "order-3"):
        for i in range(20):
            message = Message(topic)
            message.set_body(f"{key}:{i}")
            results[f"{key}:{i}"] = producer.send_orderly_with_sharding_key(message, key)
    for key in ("order-1", "order-2", "order-3"):
        mine = [results[f"{key}:{i}"] for i in range(20)]
        offsets = [r.offset for r in mine]
        assert offsets == sorted(offsets), "offsets grow in send order"
    records = read_plain(kafka_bootstrap, topic, 60)
    by_key: dict[str, list[tuple[int, int, int]]] = {}
    for record in records:
        key, i = record.value().decode().split(":")
        by_key.setdefault(key, []).append((record.offset(), int(i), record.partition()))
    for key, seen in by_key.items():
        assert len({partition for _, _, partition in seen}) == 1, f"{key} stayed in one queue"
        assert [i for _, i, _ in sorted(seen)] == list(range(20)), f"{key} kept its order"


def test_a_producer_works_as_a_context_manager(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    producer = Producer(unique("PID"))
    producer.set_name_server_address(kafka_bootstrap)
    with producer as started:
        assert send(started, topic, "in a with block").status == SendStatus.OK


def test_a_message_sent_again_after_a_timeout_keeps_its_uniq_key(
    kafka_bootstrap: str, make_producer: Callable[..., Producer], new_topic
) -> None:
    topic = new_topic(partitions=1)
    message = Message(topic)
    message.set_body("pay 30")
    away = make_producer(bootstrap="127.0.0.1:1", timeout=1000)  # Kafka unreachable: no ack
    with pytest.raises(ProducerSendSyncFailed, match="timed out|no acknowledgement") as failed:
        away.send_sync(message)
    first_id = re.search(r"[0-9A-F]{32}", str(failed.value))
    assert first_id is not None, "the failure names the message"

    retried = make_producer().send_sync(message)  # the application's retry
    again = make_producer().send_sync(message)

    assert retried.msg_id == again.msg_id == first_id.group(0)
    records = read_plain(kafka_bootstrap, topic, 2)
    assert {dict(r.headers())["UNIQ_KEY"].decode() for r in records} == {retried.msg_id}
    other = Message(topic)
    other.set_body("pay 40")
    assert make_producer().send_sync(other).msg_id != retried.msg_id, "a new message, a new id"


def test_a_synchronous_send_waits_for_its_own_record_not_for_one_stuck_before_it(
    clock_kafka: str, make_producer: Callable[..., Producer]
) -> None:
    topic = create_topic(clock_kafka, partitions=1)  # a broker that creates no topic on use
    producer = make_producer(bootstrap=clock_kafka, timeout=5000)
    stuck = Message(unique("Missing"))
    stuck.set_body("waits for a topic that never comes, up to the send timeout")
    producer.send_oneway(stuck)
    message = Message(topic)
    message.set_body("on time")

    started = time.monotonic()
    result = producer.send_sync(message)
    took = time.monotonic() - started

    assert result.status == SendStatus.OK
    assert took < 1.5, f"send_sync waited {took:.1f} s behind another topic's record"
    assert producer.flush(10) == 0
    assert producer.oneway_failures == 1, "the stuck one failed on its own, counted"
