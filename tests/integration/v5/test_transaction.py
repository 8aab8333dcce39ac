"""5.x transactions against a real broker and the 2.0 coordinator: commit, rollback, check-back."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.kafka import clients
from adapter.transaction.timing import FAST_COMMIT_WINDOW_MS
from adapter.v5 import Message, TransactionChecker, TransactionResolution
from adapter.v5.exception import (
    IllegalArgumentException,
    IllegalStateException,
    NotFoundException,
)
from adapter.wire import codec
from adapter.wire.records import HalfMessage
from tests.integration.v5.conftest import MakeV5Producer
from tests.support import read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

# The first check 1.5 s after birth, then one a second.
FAST = {"transaction_timeout_ms": 1500, "check_interval_ms": 1000, "check_max": 10}
HALF = naming.TRANS_HALF_TOPIC


class Checker(TransactionChecker):
    """Answers each check with the next answer for the message's body (the last one repeats),
    and remembers the messages it was asked about."""

    def __init__(self, answers: dict[bytes, list[TransactionResolution]] | None = None) -> None:
        self.answers = answers or {}
        self.seen: list[Message] = []
        self._lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        with self._lock:
            self.seen.append(message)
            asked = sum(1 for m in self.seen if m.body == message.body)
        answers = self.answers.get(message.body or b"")
        if not answers:
            return TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED
        return answers[min(asked, len(answers)) - 1]

    def checked(self, body: bytes) -> list[Message]:
        with self._lock:
            return [m for m in self.seen if m.body == body]


def payment(topic: str, body: bytes) -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    msg.tag = "Paid"
    msg.keys = "order-42"
    msg.add_property("amount", "30")
    return msg


def headers(record) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    return dict(record.headers() or [])


def half_at(bootstrap: str, partition: int, offset: int) -> HalfMessage:
    reader = clients.consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("half"), "enable.auto.commit": False}
    )
    try:
        reader.assign([TopicPartition(naming.kafka_topic(HALF), partition, offset)])
        record = wait_until(lambda: reader.poll(0.5), timeout=30, what="the half message")
        return codec.decode_as(HalfMessage, record.value())
    finally:
        reader.close()


def test_a_committed_transaction_is_delivered_once_and_a_rolled_back_one_never(
    make_v5_producer: MakeV5Producer, start_coordinator, system_topics: str, new_topic
) -> None:
    # RocketMQ's 6 s before the first check: the late commit lands past the fast-commit
    # window, and under load (a full suite) past a 1.5 s timeout too, which RocketMQ checks.
    start_coordinator(**{**FAST, "transaction_timeout_ms": 6000})
    topic = new_topic(partitions=2)
    checker = Checker()
    producer = make_v5_producer(topic, checker=checker)

    committed = producer.begin_transaction()
    receipt = producer.send(payment(topic, b"commit"), committed)
    committed.commit()
    rolled_back = producer.begin_transaction()
    producer.send(payment(topic, b"rollback"), rolled_back)
    rolled_back.rollback()
    late = producer.begin_transaction()
    late_receipt = producer.send(payment(topic, b"late commit"), late)
    time.sleep(FAST_COMMIT_WINDOW_MS / 1000 + 0.2)  # past the fast path: the coordinator applies it
    late.commit()

    records = read_committed(system_topics, topic, 2)
    assert Counter(r.value() for r in records) == Counter([b"commit", b"late commit"])
    by_body = {r.value(): headers(r) for r in records}
    assert by_body[b"commit"][prop.UNIQ_KEY] == receipt.message_id.encode()
    assert by_body[b"late commit"][prop.UNIQ_KEY] == late_receipt.message_id.encode()
    assert by_body[b"commit"][prop.TAGS] == b"Paid"
    assert by_body[b"commit"][prop.KEYS] == b"order-42"
    assert by_body[b"commit"]["amount"] == b"30"
    assert by_body[b"commit"][prop.PRODUCER_GROUP] == topic.encode()
    assert receipt.transaction_id == receipt.message_id
    assert receipt.message_queue.topic == HALF
    assert checker.seen == []
    with pytest.raises(IllegalStateException, match="already ended \\(COMMIT\\)"):
        committed.commit()


def test_a_transaction_left_open_is_settled_by_the_checker(
    make_v5_producer: MakeV5Producer, start_coordinator, system_topics: str, new_topic
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    unspecified = TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED
    checker = Checker(
        {
            b"commit after asking twice": [unspecified, TransactionResolution.COMMIT],
            b"roll back": [TransactionResolution.ROLLBACK],
        }
    )
    producer = make_v5_producer(topic, checker=checker)

    receipt = producer.send(
        payment(topic, b"commit after asking twice"), producer.begin_transaction()
    )
    producer.send(payment(topic, b"roll back"), producer.begin_transaction())

    records = read_committed(system_topics, topic, 1)
    assert [r.value() for r in records] == [b"commit after asking twice"]
    assert headers(records[0])[prop.UNIQ_KEY] == receipt.message_id.encode()
    assert headers(records[0])[prop.TRANSACTION_CHECK_TIMES] == b"2"
    asked = checker.checked(b"commit after asking twice")
    assert len(asked) == 2
    assert asked[0].topic == topic
    assert asked[0].message_id == receipt.message_id
    assert (asked[0].tag, asked[0].keys, asked[0].properties) == (
        "Paid",
        {"order-42"},
        {"amount": "30"},
    )
    assert len(checker.checked(b"roll back")) == 1
    # The same protocol as the 2.0 client: a half message of producer group = the topic.
    half = half_at(system_topics, receipt.message_queue.queue_id, receipt.offset)
    assert (half.transaction_id, half.producer_group, half.topic) == (
        receipt.message_id,
        topic,
        topic,
    )


def test_another_producer_of_the_topic_answers_for_one_that_shut_down(
    make_v5_producer: MakeV5Producer, start_coordinator, system_topics: str, new_topic
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    survivor = Checker({b"orphan": [TransactionResolution.COMMIT]})
    make_v5_producer(topic, checker=survivor)
    gone = make_v5_producer(topic, checker=Checker())

    receipt = gone.send(payment(topic, b"orphan"), gone.begin_transaction())
    gone.shutdown()

    records = read_committed(system_topics, topic, 1)
    assert [headers(r)[prop.UNIQ_KEY] for r in records] == [receipt.message_id.encode()]
    assert [m.message_id for m in survivor.checked(b"orphan")] == [receipt.message_id]


def test_transactional_misuse_gets_a_clear_error(
    make_v5_producer: MakeV5Producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    without_checker = make_v5_producer(topic)
    with pytest.raises(IllegalArgumentException, match="checker should not be null"):
        without_checker.begin_transaction()

    producer = make_v5_producer(topic, checker=Checker())
    grouped = payment(topic, b"grouped")
    grouped.message_group = "order-42"
    with pytest.raises(IllegalArgumentException, match="should not set message_group"):
        producer.send(grouped, producer.begin_transaction())
    transaction = producer.begin_transaction()
    producer.send(payment(topic, b"first"), transaction)
    with pytest.raises(IllegalArgumentException, match="already existed in transaction"):
        producer.send(payment(topic, b"second"), transaction)
    transaction.rollback()


def test_a_transactional_send_to_a_new_topic_creates_it_as_a_plain_send_does(
    make_v5_producer: MakeV5Producer, system_topics: str, start_coordinator
) -> None:
    start_coordinator()  # the decision may take the coordinator's path
    producer = make_v5_producer(checker=Checker())
    new = payment(unique("New"), b"first of its topic")
    transaction = producer.begin_transaction()
    producer.send(new, transaction)
    transaction.commit()
    [record] = read_committed(system_topics, str(new.topic), 1)
    assert record.value() == b"first of its topic"


def test_a_transactional_send_to_a_topic_the_cluster_will_not_create_is_not_found(
    make_v5_producer: MakeV5Producer, clock_kafka: str
) -> None:
    producer = make_v5_producer(checker=Checker(), bootstrap=clock_kafka)
    missing = payment(unique("Missing"), b"nowhere")
    with pytest.raises(NotFoundException, match="does not exist"):
        producer.send(missing, producer.begin_transaction())
