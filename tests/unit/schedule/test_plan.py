"""The forwarder's planning of a batch: deliver what it can, park what it never can, set
aside a record whose real topic is missing without holding up its level, and move each
timer on by its longest hop, deliver it once due, or drop it once recalled."""

from __future__ import annotations

import pytest

from adapter import naming
from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.message import Message, ReceivedMessage
from adapter.schedule import recall, timer
from adapter.schedule.envelope import scheduled, sent_back
from adapter.schedule.grants import ApplicationGrant, ScheduleGrants
from adapter.schedule.head_of_line import Entry
from adapter.schedule.plan import POISON, RECALLS, SCHEDULE, Batch, Parked, plan_batch
from adapter.schedule.signing import ScheduleSigner
from adapter.wire import codec

HOPS = HopTable.of(DelayLevels.parse())
NOW = 1_700_000_000_000

pytestmark = pytest.mark.timeout(30)


def parked_record(topic: str, body: str = "b", queue_id: int = -1) -> bytes:
    message = Message(topic)
    message.set_body(body)
    record = scheduled(message, level=1, unique_key="ID", born_ms=0, queue_id=queue_id)
    return codec.encode(record)


def entry(level_partition: int, offset: int, value: bytes) -> Entry[Parked]:
    return Entry(level_partition, offset, 0, Parked(value))


def a_timer(offset: int, deliver_ms: int, partition: int = 18) -> Entry[Parked]:
    return Entry(partition, offset, 0, Parked(parked_record("Orders"), f"T{offset}", deliver_ms))


def counts(**topics: int):  # type: ignore[no-untyped-def]
    return lambda kafka_topic: topics.get(kafka_topic, 0)


def plan(entries, doomed=None, partitions=None, recalled=()) -> Batch:  # type: ignore[no-untyped-def]
    return plan_batch(
        entries,
        now_ms=NOW,
        hops=HOPS,
        recalled=set(recalled).__contains__,
        doomed={} if doomed is None else doomed,
        partitions=partitions or counts(),
    )


def test_a_due_record_is_delivered_to_its_real_topic_and_its_position_advances() -> None:
    batch = plan([entry(0, 7, parked_record("Orders"))], partitions=counts(Orders=4))
    [send] = batch.sends
    assert (send.kind, send.topic, send.partition, send.reason) == ("deliver", "Orders", None, None)
    assert send.value == b"b"
    assert batch.positions == {0: 8}


def test_the_original_queue_is_kept_when_the_topic_still_has_it() -> None:
    batch = plan(
        [
            entry(0, 0, parked_record("Orders", queue_id=2)),
            entry(0, 1, parked_record("Orders", queue_id=9)),
        ],
        partitions=counts(Orders=4),
    )
    assert [s.partition for s in batch.sends] == [2, None], "queue 9 no longer exists: any queue"


def test_a_record_that_does_not_decode_is_parked_with_the_reason_and_consumed() -> None:
    batch = plan([entry(2, 5, b"\xc3\x01 not avro")])
    [send] = batch.sends
    assert (send.kind, send.topic) == ("park", POISON)
    assert send.reason is not None
    assert send.reason.startswith("corrupt: ")
    assert batch.positions == {2: 6}


def test_a_record_addressed_to_a_system_topic_is_parked_not_delivered() -> None:
    batch = plan([entry(0, 0, parked_record(naming.TRANS_HALF_TOPIC))])
    [send] = batch.sends
    assert send.topic == POISON
    assert send.reason is not None
    assert send.reason == f"refused destination: {naming.TRANS_HALF_TOPIC!r} is a system topic"


def test_a_record_whose_real_topic_is_missing_is_set_aside_and_its_level_goes_on() -> None:
    entries = [
        entry(0, 0, parked_record("Gone")),
        entry(0, 1, parked_record("Orders")),
        entry(1, 0, parked_record("Orders")),
    ]
    batch = plan(entries, partitions=counts(Orders=1))
    assert [(s.kind, s.entry.partition, s.entry.offset) for s in batch.sends] == [
        ("aside", 0, 0),
        ("deliver", 0, 1),
        ("deliver", 1, 0),
    ], "the record behind it is delivered in the same batch"
    assert batch.sends[0].topic == SCHEDULE
    assert batch.put_back == []
    assert batch.positions == {0: 2, 1: 1}


def test_a_record_no_retry_can_deliver_is_parked_with_the_reason_it_was_refused() -> None:
    doomed = {(0, 3): "refused: Broker: Message size too large"}
    batch = plan([entry(0, 3, parked_record("Orders"))], doomed, counts(Orders=1))
    [send] = batch.sends
    assert (send.topic, send.reason) == (POISON, "refused: Broker: Message size too large")
    assert doomed == {(0, 3): "refused: Broker: Message size too large"}, (
        "the verdict stays until the parking is committed: a failed transaction parks it again"
    )


# -- timers -------------------------------------------------------------------------------------


def test_a_timer_whose_time_has_come_is_delivered_with_a_delivered_marker_in_one_batch() -> None:
    batch = plan([a_timer(4, NOW)], partitions=counts(Orders=1))
    deliver, marker = batch.sends
    assert (deliver.kind, deliver.topic) == ("deliver", "Orders")
    assert (marker.kind, marker.topic, marker.key, marker.value) == (
        "delivered",
        RECALLS,
        b"T4",
        None,
    )
    assert marker.headers == [(recall.KIND_HEADER, recall.DELIVERED)]
    assert batch.positions == {18: 5}
    assert [(e.partition, e.offset) for e in batch.entries] == [(18, 4)]


def test_a_timer_still_far_off_hops_on_by_the_longest_hop_that_does_not_pass_it() -> None:
    batch = plan([a_timer(0, NOW + 7 * 60_000 + 30_000)])
    [hop] = batch.sends
    assert (hop.kind, hop.topic, hop.partition) == ("hop", SCHEDULE, 10), "7 min (level 11)"
    headers = dict(hop.headers)
    assert headers[timer.DELIVER_HEADER] == str(NOW + 450_000).encode()
    assert headers[timer.HOP_DUE_HEADER] == str(NOW + 420_000).encode()
    assert batch.positions == {18: 1}


def test_a_timer_with_less_than_the_shortest_hop_left_waits_and_holds_its_partition() -> None:
    entries = [a_timer(0, NOW + 30), a_timer(1, NOW), a_timer(0, NOW, partition=19)]
    batch = plan(entries, partitions=counts(Orders=1))
    assert [(e.partition, e.offset, e.due_ms) for e in batch.put_back] == [
        (18, 0, NOW + 30),
        (18, 1, 0),
    ], "the head waits until its deliver time, and nothing behind it passes it"
    assert [s.entry.partition for s in batch.sends] == [19, 19]
    assert 18 not in batch.positions


def test_a_recalled_timer_is_dropped_with_a_dropped_marker_and_consumed() -> None:
    batch = plan([a_timer(2, NOW)], recalled={"T2"}, partitions=counts(Orders=1))
    [dropped] = batch.sends
    assert (dropped.kind, dropped.topic, dropped.key) == ("dropped", RECALLS, b"T2")
    assert batch.positions == {18: 3}


def test_a_batch_may_commit_once_its_latest_record_is_due() -> None:
    records = [
        Entry(0, 1, NOW - 5, Parked(parked_record("Orders"))),
        Entry(1, 1, NOW + 12, Parked(parked_record("Orders"))),
    ]
    assert plan(records, partitions=counts(Orders=4)).not_before_ms == NOW + 12


def test_a_batch_delivering_a_timer_may_commit_only_at_its_deliver_time() -> None:
    late_hop = Entry(18, 3, NOW - 30, Parked(parked_record("Orders"), "T3", NOW + 15))
    batch = plan_batch(
        [late_hop],
        now_ms=NOW + 20,
        hops=HOPS,
        recalled=lambda _id: False,
        doomed={},
        partitions=counts(Orders=4),
    )
    assert [s.kind for s in batch.sends] == ["deliver", "delivered"]
    assert batch.not_before_ms == NOW + 15


# -- destinations an application must not reach through the forwarder -----------------------


@pytest.mark.parametrize(
    "topic",
    [
        naming.check_topic("PG"),
        naming.dlq_topic("GID"),
        naming.retry_topic("GID"),
        "__consumer_offsets",
        "__transaction_state",
        "RMQ_SYS_NEXT_RELEASE",
        naming.TRANS_HALF_TOPIC,
    ],
)
def test_a_record_for_a_destination_no_application_may_reach_through_the_forwarder_is_parked(
    topic: str,
) -> None:
    kafka_topic = naming.kafka_topic(topic)
    batch = plan([entry(0, 3, parked_record(topic))], partitions=counts(**{kafka_topic: 1}))
    [send] = batch.sends
    assert (send.kind, send.topic) == ("park", POISON)
    assert send.reason is not None
    assert send.reason.startswith(f"refused destination: {topic!r} "), send.reason
    assert batch.positions == {0: 4}


def test_a_consumers_send_back_still_reaches_its_groups_retry_topic() -> None:
    retry = naming.retry_topic("GID")
    received = ReceivedMessage(
        topic="Orders",
        kafka_topic="Orders",
        body=b"body",
        queue_id=0,
        queue_offset=7,
        timestamp=2,
        append_time=False,
        headers=[(prop.UNIQ_KEY, b"ID")],
    )
    record = sent_back(received, to_topic=retry, level=3, max_reconsume_times=16)
    kafka_topic = naming.kafka_topic(retry)
    batch = plan([entry(2, 0, codec.encode(record))], partitions=counts(**{kafka_topic: 1}))
    [send] = batch.sends
    assert (send.kind, send.topic) == ("deliver", kafka_topic)


# -- signed records -------------------------------------------------------------------------


KEY = b"k" * 32
GRANTS = ScheduleGrants(
    {
        "orders": ApplicationGrant("orders", KEY, frozenset({"Orders"}), frozenset({"GID_o"})),
    }
)


def signed_entry(partition: int, offset: int, value: bytes, deliver_ms: int | None = None):  # type: ignore[no-untyped-def]
    signed = ScheduleSigner("orders", KEY).headers(value)
    message_id = None if deliver_ms is None else f"T{offset}"
    return Entry(
        partition, offset, 0, Parked(value, message_id, deliver_ms, None, "orders", signed)
    )


def plan_signed(entries, partitions):  # type: ignore[no-untyped-def]
    return plan_batch(
        entries,
        now_ms=NOW,
        hops=HOPS,
        recalled=set().__contains__,
        doomed={},
        partitions=partitions,
        grants=GRANTS,
    )


def test_with_grants_a_signed_record_reaches_its_signers_topics_and_no_other() -> None:
    mine, theirs = parked_record("Orders"), parked_record("Payments")
    received = ReceivedMessage(
        topic="Orders", kafka_topic="Orders", body=b"b", queue_id=0, queue_offset=0,
        timestamp=0, append_time=False, headers=[(prop.UNIQ_KEY, b"U")],
    )  # fmt: skip
    retry = codec.encode(sent_back(received, to_topic=naming.retry_topic("GID_o"), level=3,
                                   max_reconsume_times=16))  # fmt: skip
    entries = [signed_entry(0, 0, mine), signed_entry(0, 1, theirs), signed_entry(2, 0, retry)]
    retry_topic = naming.kafka_topic(naming.retry_topic("GID_o"))
    batch = plan_signed(entries, counts(Orders=1, Payments=1, **{retry_topic: 1}))
    assert [(s.kind, s.topic) for s in batch.sends] == [
        ("deliver", "Orders"),
        ("park", POISON),
        ("deliver", naming.kafka_topic(naming.retry_topic("GID_o"))),
    ]
    assert batch.sends[1].reason == "refused destination: 'orders' is not granted 'Payments'"


def test_a_timers_hop_and_a_copy_set_aside_carry_the_signature_of_the_record() -> None:
    value = parked_record("Orders")
    signature = ScheduleSigner("orders", KEY).headers(value)
    hop_batch = plan_signed([signed_entry(18, 0, value, NOW + 600_000)], counts())
    aside_batch = plan_signed([signed_entry(0, 0, value)], counts())
    for batch, kind in ((hop_batch, "hop"), (aside_batch, "aside")):
        [send] = batch.sends
        assert send.kind == kind
        assert send.value == value
        assert set(signature) <= set(send.headers), f"the {kind} keeps the signer and signature"
