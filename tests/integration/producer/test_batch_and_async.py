"""The 2.0 Producer's extensions against a real broker: atomic batches and async sends."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
from confluent_kafka import TopicPartition

from adapter import naming
from adapter.client import Message, Producer, SendResult, SendStatus
from adapter.exceptions import ProducerSendAsyncFailed, ProducerSendSyncFailed
from adapter.kafka import clients
from tests.support import read_committed, send, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

SMALL_RECORDS = {"max.message.bytes": "2048"}
"""A topic whose broker refuses records over 2 KiB, which the producer's own check lets by."""


def messages(topic: str, bodies: list[bytes]) -> list[Message]:
    out = []
    for body in bodies:
        msg = Message(topic)
        msg.set_body(body)
        out.append(msg)
    return out


class Callbacks:
    """What ``send_async`` called back with, and on which thread."""

    def __init__(self) -> None:
        self.outcomes: list[SendResult | BaseException] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, outcome: SendResult | BaseException) -> None:
        with self._lock:
            self.outcomes.append(outcome)
            self.threads.add(threading.current_thread().name)

    def __len__(self) -> int:
        return len(self.outcomes)


def nothing_of_the_batch_is_visible(producer: Producer, bootstrap: str, topic: str) -> None:
    """A marker sent after the batch is the only record a read_committed reader sees."""
    marker = send(producer, topic, "marker")
    records = read_committed(bootstrap, topic, 1, timeout=30)
    assert [r.value() for r in records] == [b"marker"]
    assert dict(records[0].headers())["UNIQ_KEY"] == marker.msg_id.encode()


def test_a_batch_of_100_is_seen_whole_by_a_read_committed_reader_with_its_ids(
    kafka_bootstrap: str, make_producer: Callable[..., Producer], new_topic
) -> None:
    topic = new_topic(partitions=2)
    batch = messages(topic, [f"m{i}".encode() for i in range(100)])
    results = make_producer().send_batch(batch)
    assert len(results) == 100
    assert {r.status for r in results} == {SendStatus.OK}
    assert [r.msg_id for r in results] == [m.unique_key() for m in batch]
    assert all(r.offset >= 0 for r in results)
    records = read_committed(kafka_bootstrap, topic, 100, timeout=30)
    assert len(records) == 100
    seen = {dict(r.headers())["UNIQ_KEY"].decode(): r.value() for r in records}
    assert seen == {m.unique_key(): m.body for m in batch}


def test_a_batch_whose_second_message_the_broker_refuses_leaves_nothing_visible(
    kafka_bootstrap: str, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1, **SMALL_RECORDS)
    producer = make_producer()
    batch = messages(topic, [b"first", b"x" * 4000, b"third"])
    with pytest.raises(ProducerSendSyncFailed, match="was not sent.*too large"):
        producer.send_batch(batch)
    nothing_of_the_batch_is_visible(producer, kafka_bootstrap, topic)
    # the same producer sends the next batch, and the messages keep their ids when retried
    ids = [m.unique_key() for m in batch]
    retried = [batch[0], batch[2]]
    results = producer.send_batch(retried)
    assert [r.msg_id for r in results] == [ids[0], ids[2]]


def read_uncommitted_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` values of partition 0, aborted records included."""
    consumer = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("uncommitted"),
            "isolation.level": "read_uncommitted",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(naming.kafka_topic(topic), 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(30):  # up to 30 s
            values += [r.value() for r in consumer.consume(10, 1.0) if r.error() is None]
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def test_a_batch_refused_after_its_first_message_was_written_is_aborted(
    kafka_bootstrap: str, make_producer, new_topic
) -> None:
    # Records over librdkafka's batch.size (1 MB) go in produce requests of their own: the
    # first is written, the second refused, and the transaction aborted.
    topic = new_topic(partitions=1, **{"max.message.bytes": str(2 * 1024 * 1024)})
    producer = make_producer()
    first = b"1" * (1200 * 1024)
    with pytest.raises(ProducerSendSyncFailed, match="was not sent.*too large"):
        producer.send_batch(messages(topic, [first, b"2" * (2500 * 1024)]))
    assert read_uncommitted_values(kafka_bootstrap, topic, 1) == [first]
    nothing_of_the_batch_is_visible(producer, kafka_bootstrap, topic)


def test_a_batch_whose_second_message_is_too_large_raises_before_anything_is_sent(
    kafka_bootstrap: str, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer(max_message_size=1024)
    with pytest.raises(ProducerSendSyncFailed, match="over max value"):
        producer.send_batch(messages(topic, [b"first", b"x" * 2000]))
    assert send(producer, topic, "marker").offset == 0  # not even an aborted record before it


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        (lambda m: m.set_delay_time_level(2), "TimeDelayLevel"),
        (lambda m: m.put_property("TRAN_MSG", "true"), "transactional"),
        (lambda m: m.set_body(b"a" * 700), "batch size over max value"),
    ],
)
def test_a_batch_breaking_a_rule_raises_before_anything_is_sent(
    make_producer, new_topic, spoil: Callable[[Message], None], why: str
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer(max_message_size=1024)
    batch = messages(topic, [b"a" * 400, b"b" * 400])
    spoil(batch[1])
    with pytest.raises(ProducerSendSyncFailed, match=why):
        producer.send_batch(batch)
    assert send(producer, topic, "marker").offset == 0


def test_a_batch_of_two_topics_raises_before_anything_is_sent(make_producer, new_topic) -> None:
    first, second = new_topic(partitions=1), new_topic(partitions=1)
    producer = make_producer()
    with pytest.raises(ProducerSendSyncFailed, match="should be the same"):
        producer.send_batch(messages(first, [b"a"]) + messages(second, [b"b"]))
    assert send(producer, first, "marker").offset == 0


def test_async_sends_call_back_once_each_with_their_offsets_from_a_background_thread(
    make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer()
    callbacks = Callbacks()
    batch = messages(topic, [f"m{i}".encode() for i in range(20)])
    for msg in batch:
        assert producer.send_async(msg, callbacks) is None
    wait_until(lambda: len(callbacks) == 20, timeout=30, what="20 callbacks")
    assert all(isinstance(o, SendResult) for o in callbacks.outcomes)
    results = [o for o in callbacks.outcomes if isinstance(o, SendResult)]
    assert sorted(r.offset for r in results) == list(range(20))
    assert {r.msg_id for r in results} == {m.unique_key() for m in batch}
    assert {r.status for r in results} == {SendStatus.OK}
    assert threading.current_thread().name not in callbacks.threads
    assert producer.flush() == 0
    assert len(callbacks) == 20  # once each


def test_an_async_send_the_broker_refuses_reaches_the_callback_as_an_exception(
    make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1, **SMALL_RECORDS)
    callbacks = Callbacks()
    producer = make_producer()
    [msg] = messages(topic, [b"x" * 4000])
    producer.send_async(msg, callbacks)
    wait_until(lambda: len(callbacks) == 1, timeout=30, what="the callback")
    [outcome] = callbacks.outcomes
    assert isinstance(outcome, ProducerSendAsyncFailed)
    assert msg.unique_key() in str(outcome)


def test_the_removed_2_0_form_calls_success_and_exception_callbacks_apart(
    make_producer, new_topic
) -> None:
    successes, failures = Callbacks(), Callbacks()
    producer = make_producer()
    # apart: the broker refuses a whole produce request, a record that would fit included
    [fits] = messages(new_topic(partitions=1), [b"fits"])
    [too_large] = messages(new_topic(partitions=1, **SMALL_RECORDS), [b"x" * 4000])
    producer.send_async(fits, successes, failures)  # send_async(msg, success_cb, exception_cb)
    producer.send_async(too_large, successes, failures)
    wait_until(lambda: len(successes) + len(failures) == 2, timeout=30, what="two callbacks")
    [result] = successes.outcomes
    assert isinstance(result, SendResult)
    assert result.msg_id == fits.unique_key()
    [failure] = failures.outcomes
    assert isinstance(failure, ProducerSendAsyncFailed)
    assert too_large.unique_key() in str(failure)


def test_an_async_send_of_an_empty_message_reaches_the_callback_not_the_caller(
    make_producer, new_topic
) -> None:
    callbacks = Callbacks()
    make_producer().send_async(Message(new_topic(partitions=1)), callbacks)
    wait_until(lambda: len(callbacks) == 1, timeout=30, what="the callback")
    assert isinstance(callbacks.outcomes[0], ProducerSendAsyncFailed)
    assert "empty" in str(callbacks.outcomes[0])


def test_a_delayed_async_send_is_parked_on_schedule_as_send_sync_parks_it(
    system_topics: str, make_producer, new_topic
) -> None:
    callbacks = Callbacks()
    [msg] = messages(new_topic(partitions=1), [b"later"])
    msg.set_delay_time_level(1)
    make_producer().send_async(msg, callbacks)
    wait_until(lambda: len(callbacks) == 1, timeout=30, what="the callback")
    [outcome] = callbacks.outcomes
    assert isinstance(outcome, SendResult)
    assert outcome.msg_id == msg.unique_key()
    assert outcome.offset >= 0


def test_a_callback_that_raises_is_logged_and_the_next_callbacks_still_come(
    make_producer, new_topic, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer()
    callbacks = Callbacks()

    def boom(outcome: SendResult | BaseException) -> None:
        raise RuntimeError("the application's bug")

    with caplog.at_level(logging.ERROR, logger="adapter.producer"):
        [first, second] = messages(topic, [b"a", b"b"])
        producer.send_async(first, boom)
        producer.send_async(second, callbacks)
        wait_until(lambda: len(callbacks) == 1, timeout=30, what="the second callback")
        wait_until(
            lambda: "the application's bug" in caplog.text, timeout=10, what="the logged error"
        )
    assert first.unique_key() in caplog.text
