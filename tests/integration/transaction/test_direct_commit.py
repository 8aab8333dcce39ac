"""The direct commit against a real broker: on a topic whose appends are bounded in time, a
producer's COMMIT is one append to the queue, visible without a Kafka transaction; a producer
cut off between its append and its END, one whose append never landed, and a COMMIT from
another process that comes early each still end with the message in its queue once."""

from __future__ import annotations

import dataclasses
import time

import pytest

from adapter import naming
from adapter import properties as prop
from adapter.client import Message, TransactionStatus
from adapter.clock import SYSTEM_CLOCK
from adapter.exceptions import ProducerException
from adapter.kafka import clients
from adapter.transaction.direct_commit import DirectCommits
from adapter.transaction.direct_search import copy_in_queue
from adapter.transaction.producer import HalfSent
from adapter.wire.records import HalfMessage, TransactionDecision
from tests.support import DIRECT_COMMIT_2S, metric, read_committed, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


def order(topic: str, body: str) -> Message:
    message = Message(topic)
    message.set_body(body)
    return message


def commit(_msg: object, _args: object = None) -> TransactionStatus:
    return TransactionStatus.COMMIT


def cut_off_before_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer's END after a direct append never goes out (as if it died there)."""

    def lost(_end: object) -> object:
        raise ProducerException("cut off before its END")

    monkeypatch.setattr(DirectCommits, "_end", staticmethod(lost))


@pytest.fixture
def fenced(new_topic, new_group, make_transaction_producer):  # type: ignore[no-untyped-def]
    """A topic made for direct commits, a producer group and its started producer."""
    group = new_group("PG")
    return new_topic(2, **DIRECT_COMMIT_2S), group, make_transaction_producer(group, commit)


def settled(coordinator, group: str) -> bool:  # type: ignore[no-untyped-def]
    return not [p for _, p in coordinator.pending() if p.info.producer_group == group]


def recorded(coordinator, commits: int, what: str) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``coordinator`` has applied ``commits`` COMMITs (and no half message of the
    test is pending)."""
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_commits_total") >= commits,
        timeout=60,
        what=what,
    )


def test_a_commit_to_a_fenced_topic_is_one_append_visible_without_the_coordinator(
    system_topics, start_coordinator, fenced
) -> None:
    topic, group, producer = fenced
    sent = [f"direct-{i}" for i in range(20)]
    for body in sent:
        producer.send_message_in_transaction(order(topic, body), commit)
    assert producer.flush(30) == 0

    records = read_committed(system_topics, topic, len(sent))
    assert sorted(r.value().decode() for r in records) == sorted(sent)
    assert producer.fast_path is not None
    assert producer.fast_path.committed == 0, "not through a Kafka transaction"
    coordinator = start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    recorded(coordinator, len(sent), "the coordinator recording every commit")
    assert settled(coordinator, group)
    again = read_committed(system_topics, topic, len(sent))
    assert sorted(r.value().decode() for r in again) == sorted(sent), "recorded, not re-sent"


def test_a_producer_cut_off_after_its_append_is_found_by_the_check_back_not_sent_twice(
    system_topics, start_coordinator, fenced, monkeypatch
) -> None:
    topic, group, producer = fenced
    sent = producer.send_half(order(topic, "cut off"))
    cut_off_before_end(monkeypatch)
    producer.end_half(sent, TransactionDecision.COMMIT)
    assert producer.flush(30) == 0, "the append acknowledged"
    assert producer.end_failures == 1, "its END never went out"
    [appended] = read_committed(system_topics, topic, 1)
    assert appended.timestamp()[1] == sent.half.born_timestamp, "the producer's own append"

    coordinator = start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    recorded(coordinator, 1, "the check-back's COMMIT")
    assert settled(coordinator, group)
    assert len(read_committed(system_topics, topic, 1)) == 1, "found, not delivered again"


def test_an_append_that_never_landed_is_delivered_once_by_the_check_back(
    system_topics, start_coordinator, fenced
) -> None:
    topic, group, producer = fenced
    sent: HalfSent = producer.send_half(order(topic, "never appended"))  # then it dies
    assert prop.DIRECT_FENCE in sent.half.properties
    assert sent.half.queue_id >= 0

    coordinator = start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    recorded(coordinator, 1, "the check-back's COMMIT")
    [record] = read_committed(system_topics, topic, 1)
    assert record.value() == b"never appended"
    assert record.partition() == sent.half.queue_id, "the queue chosen at half time"
    assert prop.DIRECT_FENCE not in {k for k, _ in record.headers() or ()}


def test_a_commit_from_another_process_before_the_fence_passed_waits_for_the_check_back(
    system_topics, start_coordinator, fenced, monkeypatch
) -> None:
    topic, group, producer = fenced
    coordinator = start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    sent = producer.send_half(order(topic, "decided twice"))
    cut_off_before_end(monkeypatch)
    producer.end_half(sent, TransactionDecision.COMMIT)
    assert producer.flush(30) == 0, "the append acknowledged"
    assert producer.end_failures == 1, "its END never went out"
    # The application's retry reaches another process, which sends a plain COMMIT at once.
    half_at = (sent.partition, sent.offset)
    producer.end_named(sent.transaction_id, half_at, TransactionDecision.COMMIT)

    recorded(coordinator, 1, "the decision applied")
    assert settled(coordinator, group)
    assert len(read_committed(system_topics, topic, 1)) == 1, "one copy: the producer's"


def test_the_search_finds_a_resumed_message_s_append_from_its_original_born_time(
    system_topics: str, new_topic
) -> None:
    """A direct half message an operator resumed is born again; its direct append was stamped
    with the original born time, which the search starts from (``BORN_TIMESTAMP``)."""
    topic = new_topic(1, **DIRECT_COMMIT_2S)
    original_ms = int(time.time() * 1000) - 60_000
    producer = clients.producer({"bootstrap.servers": system_topics})
    headers = [(prop.UNIQ_KEY, b"TXN-RESUMED")]
    producer.produce(naming.kafka_topic(topic), b"m", partition=0, headers=headers)
    producer.flush(30)  # stamped now: CreateTime within the fence (60 s old would be refused)
    appended_ms = int(time.time() * 1000)
    resumed = HalfMessage(
        transaction_id="TXN-RESUMED",
        producer_group="PG",
        topic=topic,
        queue_id=0,
        tags=None,
        keys=None,
        properties={prop.BORN_TIMESTAMP: str(original_ms)},
        body=b"m",
        born_timestamp=appended_ms + 60_000,  # resumed a minute later
    )

    conf = {"bootstrap.servers": system_topics}
    assert copy_in_queue(conf, resumed, 30, SYSTEM_CLOCK)
    without = dataclasses.replace(resumed, properties={})
    assert not copy_in_queue(conf, without, 30, SYSTEM_CLOCK)
    elsewhere = dataclasses.replace(resumed, transaction_id="TXN-OTHER")
    assert not copy_in_queue(conf, elsewhere, 30, SYSTEM_CLOCK)
