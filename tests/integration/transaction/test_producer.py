"""The TransactionMQProducer against a real broker, without a coordinator: what it writes to
HALF and END, what it refuses, and how it answers check requests."""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.client import (
    Message,
    ReceivedMessage,
    SendStatus,
    TransactionMQProducer,
    TransactionStatus,
)
from adapter.exceptions import CodecError, ProducerSendSyncFailed
from adapter.kafka import clients
from adapter.kafka.reading import READER_SETTINGS
from adapter.transaction.envelope import check_request
from adapter.wire import codec
from adapter.wire.records import EndTransaction, HalfMessage, TransactionDecision
from tests.support import committed_offsets, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)

MakeProducer = Callable[..., TransactionMQProducer]


class LocalTransaction:
    """A ``local_execute`` (or, with one argument, a ``checker_callback``) that gives a fixed
    answer, or raises it, and remembers every message it saw."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.seen: list[ReceivedMessage] = []
        self.user_args: list[object] = []
        self._lock = threading.Lock()

    def __call__(self, message: ReceivedMessage, user_args: object = None) -> Any:
        with self._lock:
            self.seen.append(message)
            self.user_args.append(user_args)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def never_checked(message: ReceivedMessage) -> TransactionStatus:
    raise AssertionError(f"no check was expected, got one for {message.id}")


def order(topic: str, body: str = "order 42") -> Message:
    message = Message(topic)
    message.set_body(body)
    message.set_tags("TagA")
    message.set_keys("order-42")
    message.set_property("region", "eu")
    return message


def partitions(bootstrap: str, topic: str) -> list[int]:
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("meta")})
    try:
        return sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    finally:
        consumer.close()


def records_of(
    bootstrap: str, topic: str, *keys: str, only: int | None = None
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of ``topic`` of one of the transactions
    ``keys``, read to the end (of partition ``only``, if given)."""
    wanted_keys = {key.encode() for key in keys}
    wanted = partitions(bootstrap, topic) if only is None else [only]
    reader = clients.consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("reader"), **READER_SETTINGS}
    )
    found = []
    try:
        reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
        open_partitions = set(wanted)
        deadline = time.monotonic() + 30
        while open_partitions:
            assert time.monotonic() < deadline, f"{topic} was not read to its end in 30 s"
            for record in reader.consume(1000, 0.2):
                error = record.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(record.partition())
                elif error is None and transaction_of(record) in wanted_keys:
                    found.append((record.partition(), record.offset(), record.value()))
    finally:
        reader.close()
    return found


def transaction_of(record) -> bytes | None:  # type: ignore[no-untyped-def]
    """The transaction id of a HALF or END record: its key, its UNIQ_KEY header, or the id in
    its value (records carry no key, so that the producer batches them)."""
    if record.key():
        return record.key()
    headers = dict(record.headers() or [])
    if prop.UNIQ_KEY in headers:
        return headers[prop.UNIQ_KEY]
    try:
        decoded = codec.decode(record.value() or b"")
    except CodecError:
        return None
    return getattr(decoded, "transaction_id", "").encode() or None


def halves_of(bootstrap: str, transaction_id: str) -> list[tuple[int, int, HalfMessage]]:
    return [
        (p, o, codec.decode_as(HalfMessage, v))
        for p, o, v in records_of(bootstrap, HALF, transaction_id)
    ]


def ends_of(bootstrap: str, transaction_id: str, partition: int) -> list[EndTransaction]:
    """The END records of a transaction, looked for in ``partition`` only (co-partitioning)."""
    return [
        codec.decode_as(EndTransaction, v)
        for _p, _o, v in records_of(bootstrap, END, transaction_id, only=partition)
    ]


def all_ends_of(bootstrap: str, transaction_id: str) -> list[tuple[int, EndTransaction]]:
    return [
        (p, codec.decode_as(EndTransaction, v))
        for p, _o, v in records_of(bootstrap, END, transaction_id)
    ]


def half_records_in_total(bootstrap: str) -> int:
    consumer = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("meta")})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(HALF, p), timeout=10)[1]
            for p in partitions(bootstrap, HALF)
        )
    finally:
        consumer.close()


def ask(bootstrap: str, half: HalfMessage, partition: int, offset: int, check_times: int) -> None:
    """Write a check request for ``half`` to its group's check topic, as the coordinator does."""
    ask_rounds(bootstrap, [(partition, offset, half)], rounds=range(check_times, check_times + 1))


def ask_rounds(bootstrap: str, halves: list[tuple[int, int, HalfMessage]], rounds: range) -> None:
    """Write the check requests of several rounds about each of ``halves``, as a coordinator
    does while no producer of the group answers."""
    writer = clients.producer({"bootstrap.servers": bootstrap})
    for check_times in rounds:
        for partition, offset, half in halves:
            request = check_request(
                half,
                half_partition=partition,
                half_offset=offset,
                check_times=check_times,
                now_ms=1,
            )
            topic = naming.kafka_topic(naming.check_topic(half.producer_group))
            writer.produce(topic, codec.encode(request), key=half.transaction_id)
    assert writer.flush(10) == 0


def wait_until_checks_read(bootstrap: str, group: str, count: int) -> None:
    """Until the group's producers committed their check topic's offset past ``count``."""
    check_topic = naming.check_topic(group)
    wait_until(
        lambda: (
            committed_offsets(bootstrap, naming.kafka_topic(check_topic), check_topic, 1)
            == {0: count}
        ),
        timeout=30,
        what=f"the {count} check requests to be read",
    )


def pending_transaction(
    bootstrap: str, producer: TransactionMQProducer, topic: str
) -> tuple[int, int, HalfMessage]:
    """Send a transaction whose local outcome is UNKNOWN; its half message and where it is."""
    result = producer.send_message_in_transaction(order(topic), LocalTransaction(None))
    [(partition, offset, half)] = halves_of(bootstrap, result.msg_id)
    assert offset == result.offset
    return partition, offset, half


# -- the producer's own decision ---------------------------------------------------------------


def test_a_committed_transaction_writes_its_half_message_then_a_commit_in_the_same_partition(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    topic, group = new_topic(), new_group()
    producer = make_transaction_producer(group, never_checked)
    local = LocalTransaction(TransactionStatus.COMMIT)

    result = producer.send_message_in_transaction(order(topic), local, user_args={"db": 1})
    assert producer.flush() == 0

    [(partition, offset, half)] = halves_of(system_topics, result.msg_id)
    assert (result.status, result.offset) == (SendStatus.OK, offset)
    assert (half.transaction_id, half.producer_group, half.topic) == (result.msg_id, group, topic)
    assert (half.tags, half.keys, half.body) == ("TagA", "order-42", b"order 42")
    assert half.properties == {"region": "eu", "TRAN_MSG": "true", "PGROUP": group}

    [end] = ends_of(system_topics, result.msg_id, partition)
    assert (end.decision, end.from_check, end.check_times) == (TransactionDecision.COMMIT, False, 0)
    assert (end.half_partition, end.half_offset, end.producer_group) == (partition, offset, group)

    [seen] = local.seen
    assert local.user_args == [{"db": 1}]
    assert (seen.id, seen.topic, seen.body) == (result.msg_id, topic, b"order 42")
    assert (seen.queue_id, seen.queue_offset) == (partition, offset)
    assert seen.get_property(prop.TRANSACTION_ID) == result.msg_id.encode()


def test_a_rolled_back_transaction_writes_a_rollback(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    producer = make_transaction_producer(new_group(), never_checked)
    result = producer.send_message_in_transaction(
        order(new_topic()), LocalTransaction(TransactionStatus.ROLLBACK)
    )
    assert producer.flush() == 0

    [(partition, offset, _half)] = halves_of(system_topics, result.msg_id)
    [end] = ends_of(system_topics, result.msg_id, partition)
    assert (end.decision, end.half_offset, end.from_check) == (
        TransactionDecision.ROLLBACK,
        offset,
        False,
    )


def test_a_plain_int_is_taken_as_the_status_it_stands_for(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    producer = make_transaction_producer(new_group(), never_checked)
    result = producer.send_message_in_transaction(order(new_topic()), LocalTransaction(1))
    assert producer.flush() == 0
    [(partition, _offset, _half)] = halves_of(system_topics, result.msg_id)
    [end] = ends_of(system_topics, result.msg_id, partition)
    assert end.decision == TransactionDecision.ROLLBACK


@pytest.mark.parametrize(
    "answer",
    [TransactionStatus.UNKNOWN, None, "COMMIT", True, RuntimeError("the database is down")],
    ids=["UNKNOWN", "None", "a string", "a bool", "an exception"],
)
def test_an_undecided_transaction_writes_its_half_message_and_no_decision(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group, answer
) -> None:
    producer = make_transaction_producer(new_group(), never_checked)
    result = producer.send_message_in_transaction(order(new_topic()), LocalTransaction(answer))
    assert producer.flush() == 0

    assert result.status == SendStatus.OK
    assert len(halves_of(system_topics, result.msg_id)) == 1
    assert all_ends_of(system_topics, result.msg_id) == []


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["delay level", *prop.DELIVERY_TIME])
def test_a_delayed_message_is_refused_before_anything_is_written(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group, how
) -> None:
    producer = make_transaction_producer(new_group(), never_checked)
    message = order(new_topic())
    if how == "delay level":
        message.set_delay_time_level(3)
    else:
        message.put_property(how, "60000")  # set_property refuses these names to applications
    local = LocalTransaction(TransactionStatus.COMMIT)
    before = half_records_in_total(system_topics)

    with pytest.raises(ProducerSendSyncFailed, match="transactional message cannot be delayed"):
        producer.send_message_in_transaction(message, local)

    assert local.seen == []
    assert half_records_in_total(system_topics) == before


def test_a_send_to_a_missing_topic_creates_it_where_the_broker_allows_as_a_plain_send_does(
    system_topics: str, make_transaction_producer: MakeProducer, admin, new_group
) -> None:
    # The session broker creates topics on use (RocketMQ's autoCreateTopicEnable), as the
    # local broker of the quick start does.
    producer = make_transaction_producer(new_group(), never_checked)
    missing = unique("UxOrders")
    local = LocalTransaction(TransactionStatus.COMMIT)

    result = producer.send_message_in_transaction(order(missing), local)

    assert result.status is SendStatus.OK
    assert [m.topic for m in local.seen] == [missing], "the local transaction ran"
    assert missing in admin.list_topics(timeout=10).topics


def test_a_send_to_a_missing_topic_on_a_cluster_that_does_not_create_it_fails_in_one_line(
    clock_kafka: str, make_transaction_producer: MakeProducer, new_group
) -> None:
    producer = make_transaction_producer(new_group(), never_checked, bootstrap=clock_kafka)
    missing = unique("UxOrders")
    local = LocalTransaction(TransactionStatus.COMMIT)

    with pytest.raises(ProducerSendSyncFailed) as failed:
        producer.send_message_in_transaction(order(missing), local)

    assert local.seen == [], "the local transaction did not run"
    assert str(failed.value) == (
        f"topic '{missing}' does not exist and this Kafka cluster does not create topics on "
        f"use: create it with `rmq-adapter topics create {missing}`"
    )
    chain = "".join(traceback.format_exception(failed.value))
    assert "tenacity" not in chain, "no retry-library frames or errors reach the user"
    assert failed.value.__cause__ is not None, "one exception, with its cause"
    assert failed.value.__cause__.__cause__ is None
    assert failed.value.__cause__.__context__ is None


def test_an_empty_body_is_refused(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    producer = make_transaction_producer(new_group(), never_checked)
    local = LocalTransaction(TransactionStatus.COMMIT)
    with pytest.raises(ProducerSendSyncFailed, match="empty"):
        producer.send_message_in_transaction(Message(new_topic()), local)
    assert local.seen == []


def test_a_producer_that_is_not_started_refuses_to_send(new_topic) -> None:
    producer = TransactionMQProducer(unique("GID"), never_checked)
    with pytest.raises(ProducerSendSyncFailed, match="not started"):
        producer.send_message_in_transaction(order("Anything"), LocalTransaction(0))


# -- check-backs -----------------------------------------------------------------------------


def test_starting_creates_the_groups_check_topic_with_one_queue(
    system_topics: str, make_transaction_producer: MakeProducer, new_group
) -> None:
    group = new_group()
    make_transaction_producer(group, never_checked)
    check_topic = naming.kafka_topic(naming.check_topic(group))
    assert partitions(system_topics, check_topic) == [0]


@pytest.mark.parametrize("answer", [TransactionStatus.COMMIT, TransactionStatus.ROLLBACK])
def test_a_check_is_answered_with_the_checkers_decision_and_the_check_count(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group, answer
) -> None:
    topic, group = new_topic(), new_group()
    checker = LocalTransaction(answer)
    producer = make_transaction_producer(group, checker)
    partition, offset, half = pending_transaction(system_topics, producer, topic)

    ask(system_topics, half, partition, offset, check_times=2)

    [end] = wait_until(
        lambda: ends_of(system_topics, half.transaction_id, partition),
        timeout=30,
        what="the answer to the check",
    )
    assert end.decision == TransactionDecision[answer.name]
    assert (end.from_check, end.check_times, end.producer_group) == (True, 2, group)
    assert (end.half_partition, end.half_offset) == (partition, offset)

    [seen] = checker.seen
    assert seen.get_property(prop.TRANSACTION_CHECK_TIMES) == b"2"
    assert (seen.id, seen.topic, seen.body) == (half.transaction_id, topic, b"order 42")
    assert (seen.tags, seen.keys, seen.get_property("region")) == (b"TagA", b"order-42", b"eu")
    assert (seen.queue_id, seen.queue_offset) == (partition, offset)


def test_a_check_answered_unknown_writes_nothing_and_is_not_asked_again(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    group = new_group()
    checker = LocalTransaction(RuntimeError("cannot tell yet"))
    producer = make_transaction_producer(group, checker)
    partition, offset, half = pending_transaction(system_topics, producer, new_topic())

    ask(system_topics, half, partition, offset, check_times=1)

    wait_until_checks_read(system_topics, group, 1)
    assert len(checker.seen) == 1
    assert all_ends_of(system_topics, half.transaction_id) == []


def test_an_unreadable_check_request_is_skipped_and_the_next_one_answered(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    group = new_group()
    checker = LocalTransaction(TransactionStatus.ROLLBACK)
    producer = make_transaction_producer(group, checker)
    partition, offset, half = pending_transaction(system_topics, producer, new_topic())
    writer = clients.producer({"bootstrap.servers": system_topics})
    writer.produce(naming.kafka_topic(naming.check_topic(group)), b"\xc3\x01 not avro")
    assert writer.flush(10) == 0

    ask(system_topics, half, partition, offset, check_times=1)

    wait_until(
        lambda: ends_of(system_topics, half.transaction_id, partition),
        timeout=30,
        what="the answer to the readable check",
    )
    assert [m.id for m in checker.seen] == [half.transaction_id]


def test_a_check_is_answered_by_another_producer_of_the_group(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    topic, group = new_topic(), new_group()
    sender_checker = LocalTransaction(TransactionStatus.ROLLBACK)
    sender = make_transaction_producer(group, sender_checker)
    other_checker = LocalTransaction(TransactionStatus.COMMIT)
    make_transaction_producer(group, other_checker)
    partition, offset, half = pending_transaction(system_topics, sender, topic)

    sender.shutdown()
    ask(system_topics, half, partition, offset, check_times=1)

    [end] = wait_until(
        lambda: ends_of(system_topics, half.transaction_id, partition),
        timeout=30,
        what="the other producer's answer",
    )
    assert (end.decision, end.from_check) == (TransactionDecision.COMMIT, True)
    assert sender_checker.seen == []
    assert [m.id for m in other_checker.seen] == [half.transaction_id]


@pytest.mark.parametrize("answer", [TransactionStatus.COMMIT, TransactionStatus.UNKNOWN])
def test_checks_that_piled_up_while_no_producer_lived_reach_the_next_one_once_per_half(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group, answer
) -> None:
    topic, group = new_topic(), new_group()
    gone = make_transaction_producer(group, never_checked)
    halves = [pending_transaction(system_topics, gone, topic) for _ in range(4)]
    gone.shutdown()
    ask_rounds(system_topics, halves, rounds=range(1, 6))

    checker = LocalTransaction(answer)
    make_transaction_producer(group, checker)

    wait_until_checks_read(system_topics, group, 20)
    asked_about = sorted((m.id, m.get_property(prop.TRANSACTION_CHECK_TIMES)) for m in checker.seen)
    assert asked_about == sorted((half.transaction_id, b"5") for _p, _o, half in halves), (
        "each half once, at its latest check"
    )
    decisions = [
        len(ends_of(system_topics, half.transaction_id, partition))
        for partition, _o, half in halves
    ]
    assert decisions == [1 if answer == TransactionStatus.COMMIT else 0] * 4


# -- concurrency -----------------------------------------------------------------------------


def test_eight_threads_may_send_transactions_at_once(
    system_topics: str, make_transaction_producer: MakeProducer, new_topic, new_group
) -> None:
    topic = new_topic()
    producer = make_transaction_producer(new_group(), never_checked)
    local = LocalTransaction(TransactionStatus.COMMIT)
    results: list[Any] = []
    failures: list[BaseException] = []

    def send_five() -> None:
        try:
            for i in range(5):
                results.append(producer.send_message_in_transaction(order(topic, f"m{i}"), local))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=send_five) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert producer.flush() == 0

    assert len({r.msg_id for r in results}) == 40
    seen = {m.id: (m.queue_id, m.queue_offset) for m in local.seen}
    found = all_ends_of_many(system_topics, seen)
    assert len(found) == 40
    ends = {end.transaction_id: (p, end) for p, end in found}
    for result in results:
        partition, end = ends[result.msg_id]
        assert (partition, end.half_offset) == seen[result.msg_id]
        assert end.half_offset == result.offset
        assert end.decision == TransactionDecision.COMMIT


def all_ends_of_many(
    bootstrap: str, transaction_ids: dict[str, object]
) -> list[tuple[int, EndTransaction]]:
    """The END records of several transactions."""
    return [
        (p, codec.decode_as(EndTransaction, v))
        for p, _o, v in records_of(bootstrap, END, *transaction_ids)
    ]
