"""``RMQ_SYS_TIMER_RECALL`` on Kafka: a recaller's request and verdict, and the forwarder's view.

Reproduces the broker side of RocketMQ 5.5's ``recallMessage`` with the protocol of
:mod:`adapter.schedule.recall`:

- :func:`recall` reads the topic read_committed from a minute before the deliver time to its
  end: a DELIVERED marker of the id refuses the recall, a RECALL or DROPPED one means it was
  recalled already, and nothing is written. Otherwise it appends a RECALL record and reads on
  up to it: a DELIVERED marker of the same id before it means the recall lost, and the loser
  writes DELIVERED again, so that compaction keeps the delivery on record;
- :class:`RecallView` is the forwarder's reader (read_uncommitted, so that it can read past the
  markers of its own open transaction): every RECALL seen, by id, with its offset.

Known gaps: the topic has one partition, so every recall and every timer delivery of the
cluster passes through one leader (tiny records: thousands per second).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError
from adapter.kafka import clients, reading, writing
from adapter.schedule import recall as rules
from adapter.schedule.recall import Marker, RecallHandle

log = logging.getLogger(__name__)

RECALL_TOPIC = naming.kafka_topic(naming.TIMER_RECALL_TOPIC)
PARTITION = 0
_GROUP = "rmq-adapter-recall-reader"


def marker(record: Any) -> Marker | None:
    """The recall-topic record as a :class:`Marker`; None when it is not one of ours."""
    key = record.key()
    kind = next((v for k, v in record.headers() or () if k == rules.KIND_HEADER), None)
    if key is None or kind is None:
        return None
    return Marker(record.offset() or 0, key.decode("utf-8", "replace"), kind)


def recall(
    producer: Producer,
    conf: Mapping[str, Any],
    handle: RecallHandle,
    timeout_s: float,
    *,
    reports_served: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Recall the timer of ``handle``; :class:`AdapterError` when it was delivered already, or
    when the verdict could not be read within ``timeout_s`` (the recall may then still hold).

    The log as it is decides first: a delivery there refuses the recall, a recall there
    stands, and nothing is written. Otherwise a RECALL is appended, and a delivery committed
    before it means the recall lost: the loser writes the delivery again
    (:data:`~adapter.schedule.recall.LOST_RECALL_MARK`), so compaction, which keeps the last
    record of the id, keeps the delivery on record and not the recall that lost."""
    now = clock.now_ms()
    if now > handle.deliver_ms + rules.RECALL_HORIZON_MS:
        raise AdapterError(
            f"message {handle.message_id} was due {(now - handle.deliver_ms) // 1000} s ago: "
            "too late to recall"
        )
    delivered = AdapterError(f"message {handle.message_id} was delivered already; cannot recall")

    def append(value: bytes | None, kind: bytes, what: str) -> int:
        ack = writing.produce_and_ack(
            producer,
            RECALL_TOPIC,
            value,
            timeout_s=timeout_s,
            reports_served=reports_served,
            what=what,
            key=handle.message_id.encode(),
            partition=PARTITION,
            headers=[(rules.KIND_HEADER, kind)],
        )
        return ack.offset

    reader = _MarkerReader(conf, handle.deliver_ms - rules.SCAN_FROM_MS, timeout_s)
    try:
        seen = rules.seen_before(reader.read_to(reader.end), handle.message_id)
        if seen is rules.Seen.DELIVERED:
            raise delivered
        if seen is rules.Seen.RECALLED:
            return
        offset = append(
            str(handle.deliver_ms).encode(), rules.RECALL, f"recall of {handle.message_id}"
        )
        markers = reader.read_to(offset)
    finally:
        reader.close()
    if rules.delivered_before(markers, handle.message_id, offset):
        append(None, rules.LOST_RECALL_MARK, f"delivery of {handle.message_id} (recall lost)")
        raise delivered


class _MarkerReader:
    """Committed markers of the recall topic from the first one stored at ``from_ms`` or
    later, read on in steps (:meth:`read_to`), within one deadline."""

    def __init__(self, conf: Mapping[str, Any], from_ms: int, timeout_s: float) -> None:
        self._deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        self._consumer = clients.consumer({"group.id": _GROUP, **conf, **reading.READER_SETTINGS})
        try:
            partition = TopicPartition(RECALL_TOPIC, PARTITION)
            _, self.end = self._consumer.get_watermark_offsets(partition, timeout_s, cached=False)
            [start] = self._consumer.offsets_for_times(
                [TopicPartition(RECALL_TOPIC, PARTITION, max(0, from_ms))], timeout_s
            )
        except BaseException:
            self._consumer.close()
            raise
        self._next = start.offset if 0 <= start.offset <= self.end else self.end
        """The offset of the next record to read."""
        self._ahead: list[Marker] = []
        self._consumer.assign([TopicPartition(RECALL_TOPIC, PARTITION, self._next)])

    def read_to(self, offset: int) -> list[Marker]:
        """The markers below ``offset`` not returned yet (a fetch may bring markers past
        ``offset``: they are kept for the next call)."""
        remaining = self._deadline - SYSTEM_CLOCK.monotonic()
        markers = self._ahead + _read(
            self._consumer, lambda: self._next >= offset, remaining, self._passed
        )
        self._ahead = [m for m in markers if m.offset >= offset]
        return [m for m in markers if m.offset < offset]

    def close(self) -> None:
        self._consumer.close()

    def _passed(self, record: Any) -> None:
        error = record.error()
        if error is None:
            self._next = max(self._next, (record.offset() or 0) + 1)
        elif error.code() == KafkaError._PARTITION_EOF:
            self._next = max(self._next, record.offset() or 0)


def _position(consumer: Consumer) -> int:
    [tp] = consumer.position([TopicPartition(RECALL_TOPIC, PARTITION)])
    return tp.offset


def _read(
    consumer: Consumer,
    done: Callable[[], bool],
    timeout_s: float,
    passed: Callable[[Any], None] | None = None,
) -> list[Marker]:
    """The markers read until ``done()``; each record (end-of-partition events included) is
    shown to ``passed`` first. :class:`AdapterError` after ``timeout_s``."""
    deadline = SYSTEM_CLOCK.monotonic() + timeout_s
    markers: list[Marker] = []
    while not done():
        if SYSTEM_CLOCK.monotonic() > deadline:
            raise AdapterError(
                f"{naming.TIMER_RECALL_TOPIC} could not be read within {timeout_s:g} s; "
                "the recall may still take effect"
            )
        for record in reading.fetch(consumer, 500, 0.1):
            if passed is not None:
                passed(record)
            error = record.error()
            if error is None:
                found = marker(record)
                if found is not None:
                    markers.append(found)
            elif error.code() != KafkaError._PARTITION_EOF and not error.retriable():
                raise AdapterError(f"reading {naming.TIMER_RECALL_TOPIC}: {error.str()}")
    return markers


class RecallView:
    """The forwarder's reader of every RECALL, from the topic's start (compaction keeps it
    short: a recall is removed once its timer was dropped)."""

    def __init__(self, conf: Mapping[str, Any], client_id: str) -> None:
        settings = {
            **conf,
            "group.id": _GROUP,
            "client.id": client_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_uncommitted",
            "auto.offset.reset": "earliest",
        }
        self._consumer = clients.consumer(settings)
        self._consumer.assign([TopicPartition(RECALL_TOPIC, PARTITION, -2)])
        self.recalls: dict[str, int] = {}
        """Every recalled message id, with the offset of its first RECALL."""

    def poll(self) -> None:
        """Take in what has arrived, without waiting."""
        self._take(reading.fetch(self._consumer, 1000, 0))

    def read_past(self, offset: int, timeout_s: float) -> None:
        """Read up to and including ``offset``; :class:`AdapterError` after ``timeout_s``."""
        for found in _read(self._consumer, lambda: _position(self._consumer) > offset, timeout_s):
            self._note(found)

    def forget(self, message_id: str) -> None:
        """The timer was dropped: its recall is settled."""
        self.recalls.pop(message_id, None)

    def close(self) -> None:
        self._consumer.close()

    def _take(self, records: list[Any]) -> None:
        for record in records:
            if record.error() is None:
                found = marker(record)
                if found is not None:
                    self._note(found)

    def _note(self, found: Marker) -> None:
        if found.kind == rules.RECALL:
            self.recalls.setdefault(found.message_id, found.offset)
