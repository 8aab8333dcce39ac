"""The 5.x Producer against a real broker: what it sends is what a 2.0 consumer receives."""

from __future__ import annotations

import base64
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.kafka import clients
from adapter.producer import routing
from adapter.v5 import Message, SendReceipt
from adapter.v5.exception import IllegalArgumentException
from tests.integration.v5.conftest import MakeV5Producer
from tests.support import Recorder, read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def message(topic: str, body: bytes, **fields: object) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    for name, value in fields.items():
        setattr(msg, name, value)
    return msg


def end_offsets(bootstrap: str, topic: str) -> list[int]:
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("meta")})
    try:
        kafka_topic = naming.kafka_topic(topic)
        partitions = consumer.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions
        return [
            consumer.get_watermark_offsets(TopicPartition(kafka_topic, p), timeout=10)[1]
            for p in sorted(partitions)
        ]
    finally:
        consumer.close()


def test_a_sent_message_reaches_a_2_0_push_consumer_with_its_id_tag_keys_and_properties(
    make_v5_producer: MakeV5Producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic()
    producer = make_v5_producer(topic)
    msg = message(topic, b'{"order": 42}', tag="Paid")
    msg.keys = "order-42"
    msg.keys = "alice"
    msg.add_property("amount", "30")

    receipt = producer.send(msg)

    assert receipt.message_id == msg.message_id
    assert len(receipt.message_id) == 32
    assert receipt.transaction_id is None
    assert receipt.message_queue.topic == topic
    assert msg.message_type == 1  # NORMAL
    recorder = Recorder()
    make_consumer(new_group(), topic, recorder, "Paid")
    wait_until(lambda: len(recorder) == 1, what="the message at the 2.0 consumer")
    received = recorder.messages[0]
    assert received.id == receipt.message_id
    assert received.body == b'{"order": 42}'
    assert received.tags == b"Paid"
    assert set(received.keys.split()) == {b"order-42", b"alice"}
    assert received.get_property("amount") == b"30"
    assert (received.queue_id, received.queue_offset) == (
        receipt.message_queue.queue_id,
        receipt.offset,
    )


def test_send_async_completes_each_future_with_its_receipt_on_the_callback_thread(
    make_v5_producer: MakeV5Producer, system_topics: str, new_topic
) -> None:
    topic = new_topic()
    producer = make_v5_producer()
    callback_threads: list[str] = []

    def on_done(_future: Future[SendReceipt]) -> None:
        callback_threads.append(threading.current_thread().name)

    futures = [producer.send_async(message(topic, f"async {i}".encode())) for i in range(5)]
    for future in futures:
        future.add_done_callback(on_done)
    receipts = [future.result(timeout=30) for future in futures]

    assert len({r.message_id for r in receipts}) == 5
    records = read_committed(system_topics, topic, 5)
    ids = {dict(r.headers())[prop.UNIQ_KEY].decode() for r in records}
    assert ids == {r.message_id for r in receipts}
    assert sorted(r.value() for r in records) == [f"async {i}".encode() for i in range(5)]
    # A callback added to a pending future runs where the future completes: on the producer's
    # callback thread, never on the thread serving Kafka's delivery reports.
    wait_until(lambda: len(callback_threads) == 5, timeout=10, what="the callbacks")
    here = threading.current_thread().name
    assert all(t == here or t.startswith("v5-send-callback") for t in callback_threads)


def test_one_message_sent_twice_at_once_gets_two_receipts_each_naming_its_own_record(
    make_v5_producer: MakeV5Producer, system_topics: str, new_topic
) -> None:
    topic = new_topic()
    producer = make_v5_producer()
    msg = message(topic, b"sent twice")
    futures = [producer.send_async(msg) for _ in range(3)]
    with ThreadPoolExecutor(3) as pool:
        sync = list(pool.map(lambda _: producer.send(msg), range(3)))

    receipts = [future.result(timeout=30) for future in futures] + sync

    records = read_committed(system_topics, topic, 6)
    where = {
        dict(r.headers())[prop.UNIQ_KEY].decode(): (r.partition(), r.offset()) for r in records
    }
    assert len(where) == 6, "six records, six ids"
    assert {r.message_id: (r.message_queue.queue_id, r.offset) for r in receipts} == where


def test_a_timer_edited_after_send_async_keeps_the_recall_handle_of_what_was_sent(
    make_v5_producer: MakeV5Producer, new_topic
) -> None:
    topic = new_topic()
    producer = make_v5_producer()
    deliver_at = time.time_ns() // 1_000_000 + 60_000
    timed = message(topic, b"later", delivery_timestamp=deliver_at)
    future = producer.send_async(timed)
    timed.delivery_timestamp = deliver_at + 60_000  # the application reuses its message

    receipt = future.result(timeout=30)

    handle = str(receipt.recall_handle)
    fields = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode().split(" ")
    assert fields[1:4] == [topic, receipt.message_id, str(deliver_at)]
    assert producer.recall_message(topic, handle) == receipt.message_id


def test_a_message_group_keeps_its_messages_in_order_on_one_partition(
    make_v5_producer: MakeV5Producer, system_topics: str, new_topic
) -> None:
    topic = new_topic(partitions=4)
    producer = make_v5_producer(topic)
    groups = ("order-1", "order-2", "order-3")
    receipts: dict[str, list[SendReceipt]] = {g: [] for g in groups}
    for step in range(4):
        for group in groups:
            msg = message(topic, f"{group} step {step}".encode(), message_group=group)
            receipts[group].append(producer.send(msg))
        producer.send_async(message(topic, f"async {step}".encode(), message_group="order-1"))

    records = read_committed(system_topics, topic, 16)
    for group in groups:
        expected = routing.queue_for_sharding_key(group, 4)
        assert {r.message_queue.queue_id for r in receipts[group]} == {expected}
        offsets = [r.offset for r in receipts[group]]
        assert offsets == sorted(offsets)
        mine = [r for r in records if r.key() == group.encode()]
        assert {r.partition() for r in mine} == {expected}
        in_log = [r.value().decode() for r in sorted(mine, key=lambda r: r.offset())]
        assert [b for b in in_log if "step" in b] == [f"{group} step {s}" for s in range(4)]
        assert all(dict(r.headers())[prop.SHARDING_KEY] == group.encode() for r in mine)
    order_1 = [r for r in records if r.key() == b"order-1"]
    assert [r.value() for r in sorted(order_1, key=lambda r: r.offset())][:2] == [
        b"order-1 step 0",
        b"async 0",
    ]


def test_bad_input_gets_a_clear_error_and_nothing_is_sent(
    make_v5_producer: MakeV5Producer, system_topics: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_v5_producer(topic)

    with pytest.raises(IllegalArgumentException, match="topic has not been set"):
        message("", b"x")
    no_topic = Message()
    no_topic.body = b"x"
    with pytest.raises(IllegalArgumentException, match="topic has not been set"):
        producer.send(no_topic)
    oversized = message(topic, b"x" * (4 * 1024 * 1024 + 1))
    with pytest.raises(IllegalArgumentException, match="max size=4194304 bytes"):
        producer.send(oversized)
    with pytest.raises(IllegalArgumentException, match="max size=4194304 bytes"):
        producer.send_async(oversized)
    no_body = Message()
    no_body.topic = topic
    with pytest.raises(IllegalArgumentException, match="body is none"):
        producer.send(no_body)
    timed = message(topic, b"later", delivery_timestamp=1_900_000_000)  # 2030, in seconds
    with pytest.raises(IllegalArgumentException, match="at most 40 days ahead"):
        producer.send(timed)
    with pytest.raises(IllegalArgumentException, match="forbidden"):
        producer.send(message("RMQ_SYS_TRANS_HALF_TOPIC", b"x"))

    assert end_offsets(system_topics, topic) == [0]
    producer.send(message(topic, b"fine"))
    assert end_offsets(system_topics, topic) == [1]
