"""One forwarder batch in its transaction: what Kafka refused, and where DELIVERED markers are."""

from __future__ import annotations

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaRecord

from adapter.schedule.head_of_line import Entry
from adapter.schedule.held import Parked, Send
from adapter.schedule.plan import Batch
from adapter.schedule.transit import Transit


def send(offset: int, kind: str = "deliver", key: bytes | None = None) -> Send:
    entry = Entry(partition=2, offset=offset, due_ms=0, item=Parked(b"x"))
    return Send(entry, kind, "Orders", b"x", key=key)  # type: ignore[arg-type]


def test_a_refused_record_is_noted_with_its_level_offset_and_error() -> None:
    transit = Transit(Batch(), frozenset())
    refused = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    transit.report_for(send(7))(refused, KafkaRecord(topic="Orders", partition=0, offset=1))
    transit.report_for(send(8))(None, KafkaRecord(topic="Orders", partition=0, offset=2))
    assert transit.failures() == [(2, 7, refused)]


def test_a_delivered_marker_is_awaited_until_its_offset_is_known() -> None:
    transit = Transit(Batch(), frozenset())
    report = transit.report_for(send(7, "delivered", key=b"MSG1"))
    assert transit.markers == {"MSG1": -1}
    assert not transit.markers_acknowledged()
    report(None, KafkaRecord(topic="RMQ_SYS_TIMER_RECALL", partition=0, offset=41))
    assert transit.markers == {"MSG1": 41}
    assert transit.markers_acknowledged()


def test_each_batch_starts_with_nothing_learnt() -> None:
    first = Transit(Batch(), frozenset())
    first.report_for(send(7, "delivered", key=b"MSG1"))
    assert Transit(Batch(), frozenset()).markers == {}
