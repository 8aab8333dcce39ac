"""The forwarder's planning of a batch: deliver what it can, park what it never can, and hold a
level back while its real topic is missing, without holding up the other levels."""

from __future__ import annotations

import pytest

from adapter import naming
from adapter.message import Message
from adapter.schedule.envelope import scheduled
from adapter.schedule.forwarder import POISON, backoff_s, plan_batch
from adapter.schedule.head_of_line import Entry
from adapter.wire import codec

pytestmark = pytest.mark.timeout(30)


def parked_record(topic: str, body: str = "b", queue_id: int = -1) -> bytes:
    message = Message(topic)
    message.set_body(body)
    record = scheduled(message, level=1, unique_key="ID", born_ms=0, queue_id=queue_id)
    return codec.encode(record)


def entry(level_partition: int, offset: int, value: bytes) -> Entry[bytes]:
    return Entry(level_partition, offset, 0, value)


def counts(**topics: int):  # type: ignore[no-untyped-def]
    return lambda kafka_topic: topics.get(kafka_topic, 0)


def test_a_due_record_is_delivered_to_its_real_topic_and_its_position_advances() -> None:
    batch = plan_batch(
        [entry(0, 7, parked_record("Orders"))], doomed={}, partitions=counts(Orders=4)
    )
    [send] = batch.sends
    assert (send.topic, send.partition, send.reason) == ("Orders", None, None)
    assert send.delivery is not None
    assert send.delivery.value == b"b"
    assert batch.positions == {0: 8}


def test_the_original_queue_is_kept_when_the_topic_still_has_it() -> None:
    plan = plan_batch(
        [
            entry(0, 0, parked_record("Orders", queue_id=2)),
            entry(0, 1, parked_record("Orders", queue_id=9)),
        ],
        doomed={},
        partitions=counts(Orders=4),
    )
    assert [s.partition for s in plan.sends] == [2, None], "queue 9 no longer exists: any queue"


def test_a_record_that_does_not_decode_is_parked_with_the_reason_and_consumed() -> None:
    batch = plan_batch([entry(2, 5, b"\xc3\x01 not avro")], doomed={}, partitions=counts())
    [send] = batch.sends
    assert send.topic == POISON
    assert send.delivery is None
    assert send.reason is not None
    assert send.reason.startswith("corrupt: ")
    assert batch.positions == {2: 6}


def test_a_record_addressed_to_a_system_topic_is_parked_not_delivered() -> None:
    batch = plan_batch(
        [entry(0, 0, parked_record(naming.TRANS_HALF_TOPIC))], doomed={}, partitions=counts()
    )
    [send] = batch.sends
    assert send.topic == POISON
    assert send.reason is not None
    assert send.reason.startswith("invalid: ")
    assert "forbidden" in send.reason


def test_a_missing_real_topic_holds_its_level_back_and_the_other_levels_go_on() -> None:
    entries = [
        entry(0, 0, parked_record("Gone")),
        entry(0, 1, parked_record("Orders")),
        entry(1, 0, parked_record("Orders")),
    ]
    batch = plan_batch(entries, doomed={}, partitions=counts(Orders=1))
    assert [(s.entry.partition, s.entry.offset) for s in batch.sends] == [(1, 0)]
    assert [(e.partition, e.offset) for e in batch.put_back] == [(0, 0), (0, 1)], (
        "the level keeps its order: nothing behind the refused record goes first"
    )
    assert batch.refused == {0: "topic 'Gone' is not available"}
    assert batch.positions == {1: 1}


def test_a_record_no_retry_can_deliver_is_parked_with_the_reason_it_was_refused() -> None:
    doomed = {(0, 3): "refused: Broker: Message size too large"}
    batch = plan_batch(
        [entry(0, 3, parked_record("Orders"))], doomed=doomed, partitions=counts(Orders=1)
    )
    [send] = batch.sends
    assert (send.topic, send.reason) == (POISON, "refused: Broker: Message size too large")
    assert doomed == {}, "the verdict is used once"


def test_refused_deliveries_back_off_exponentially_up_to_thirty_seconds() -> None:
    waits = [backoff_s(n) for n in (1, 2, 3, 4, 20)]
    assert waits[0] < waits[1] < waits[2] < waits[3]
    assert 30 <= waits[4] <= 30.1
