"""Find a message by id, key or tag within a time window, and the records of its whole life.

Plays the part of rocketmq-dashboard's message query (by id, by key, by topic and time) and
its message trace. ``show`` reads, within the window, the transaction topics (HALF, END, OP),
every ``%CHECK%`` topic, ``SCHEDULE_TOPIC_XXXX``, every ``%RETRY%`` and ``%DLQ%`` topic and the
topics the message was sent to, keeps the records of the message (its id is the ``UNIQ_KEY``,
which is also a transactional message's transaction id), and asks each consumer group that
committed on the message's queue whether its commit is past it. :mod:`adapter.ops.lifecycle`
words the steps.

With a message index (:mod:`adapter.ops.message_index`, kept by ``rmq-adapter spark index``),
the topics it covers are not scanned: the index gives the places of the matching records,
which are read from Kafka by place and matched as a scan would match them, and only the records
newer than the index (past its last offset in each partition) are scanned, so the answer is as
complete as a scan's. The system topics (HALF, END, OP, ``%CHECK%``, the schedule topic) are
not indexed and are always scanned.

Known gaps: a record a release of the adapter wrote with a schema this one does not know is
counted as unreadable, not shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.consumer.send_back import DLQ_REASON
from adapter.exceptions import AdapterError, CodecError
from adapter.kafka import clients
from adapter.kafka.reading import header_text
from adapter.ops import lifecycle
from adapter.ops.groups import Groups
from adapter.ops.lifecycle import Place, Step
from adapter.ops.message_index import MessageIndex
from adapter.ops.window_scan import fetch, scan
from adapter.wire import codec
from adapter.wire.records import (
    CheckRequest,
    EndTransaction,
    HalfMessage,
    OpRecord,
    Record,
    ScheduledMessage,
)


def place_of(record: KafkaRecord) -> Place:
    topic = naming.decode(record.topic() or "")
    return Place(topic, record.partition() or 0, record.offset() or 0)


def stored_at(record: KafkaRecord) -> int:
    return int(record.timestamp()[1])


@dataclass
class Life:
    """What ``show`` found: the steps, each group's state, and what was read."""

    steps: list[Step] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    records: int = 0
    topics: int = 0
    unreadable: int = 0
    source: str = "scan"
    """``index`` when the message index answered for the topics it covers, else ``scan``."""
    indexed: int = 0
    """Records the index found (read from Kafka by their place)."""
    gone: int = 0
    """Places the index named that hold no record any more (retention)."""

    def summary(self) -> str:
        extra = f", {self.unreadable} unreadable" if self.unreadable else ""
        scanned = f"scanned {self.records:,} records of {self.topics} topics in the window{extra}"
        if self.source != "index":
            return f"({scanned}; source: scan)"
        gone = f", {self.gone} gone from Kafka" if self.gone else ""
        found = f"{self.indexed:,} record{'' if self.indexed == 1 else 's'}"
        return (
            f"(source: index, which found {found}{gone}; {scanned}, "
            "past the index's end or not in it)"
        )


def by_id(msg_id: str) -> Callable[[KafkaRecord], bool]:
    """Whether a record is the message ``msg_id`` (its ``UNIQ_KEY``)."""
    return lambda record: header_text(record, prop.UNIQ_KEY) == msg_id


def by_key_and_tag(key: str | None, tag: str | None) -> Callable[[KafkaRecord], bool]:
    """Whether a record has ``key`` among its ``KEYS`` and the tag ``tag`` (each when given)."""

    def match(record: KafkaRecord) -> bool:
        keys = (header_text(record, prop.KEYS) or "").split()
        return (key is None or key in keys) and (
            tag is None or header_text(record, prop.TAGS) == tag
        )

    return match


class MessageSearch:
    """Queries over [``begin_ms``, ``end_ms``); each Kafka read waits at most ``timeout_s``."""

    def __init__(
        self,
        conf: Mapping[str, Any],
        begin_ms: int,
        end_ms: int,
        timeout_s: float,
        index: MessageIndex | None = None,
    ) -> None:
        if end_ms <= begin_ms:
            raise AdapterError("the window is empty: --end must be after --begin")
        self._conf = dict(conf)
        self._begin_ms, self._end_ms = begin_ms, end_ms
        self._timeout_s = timeout_s
        self._index = index
        self._topics = sorted(clients.reach(self._conf, timeout_s).topics)

    def _with_prefix(self, prefix: str) -> list[str]:
        encoded = naming.encode(prefix)
        return [t for t in self._topics if t.startswith(encoded)]

    def _scan(
        self,
        life: Life,
        topics: list[str],
        match: Callable[[KafkaRecord], bool],
        lookup: Mapping[str, str | None] | None = None,
    ) -> list[KafkaRecord]:
        """The records of ``topics`` (Kafka names) in the window that ``match``: from the index
        (its places for ``lookup``: ``msg_id``, ``key``, ``tag``) and a scan of what is newer
        when there is one and a ``lookup``, else from a scan of the window."""
        present = [t for t in topics if t in self._topics]
        indexed: list[KafkaRecord] = []
        after: dict[tuple[str, int], int] = {}
        if self._index is not None and lookup is not None:
            names = [naming.decode(t) for t in present]
            after = self._index.high_water(names)
            places = self._index.places(names, self._begin_ms, self._end_ms, **lookup)
            fetched, gone = fetch(self._conf, places, self._timeout_s)
            indexed = [r for r in fetched if match(r)]
            life.indexed, life.gone = life.indexed + len(places), life.gone + len(gone)
            if after:  # the index covers these topics (else it is all scan: say so)
                life.source = "index"
        found = scan(
            self._conf, present, self._begin_ms, self._end_ms, match, self._timeout_s, after=after
        )
        life.records += found.records
        life.topics += len(present)
        return indexed + found.found

    def _decoded(self, life: Life, records: list[KafkaRecord]) -> list[tuple[KafkaRecord, Record]]:
        out = []
        for record in records:
            try:
                out.append((record, codec.decode(record.value() or b"")))
            except CodecError:
                life.unreadable += 1
        return out

    def show(self, msg_id: str, topics: list[str]) -> Life:
        """The life of the message ``msg_id``; ``topics`` (RocketMQ names) are read for its
        delivery besides those its half or scheduled records name."""
        life = Life()
        wanted = msg_id.encode()
        is_it = by_id(msg_id)
        system = [
            naming.kafka_topic(naming.TRANS_HALF_TOPIC),
            naming.kafka_topic(naming.TRANS_END_TOPIC),
            naming.kafka_topic(naming.TRANS_OP_TOPIC),
            naming.kafka_topic(naming.SCHEDULE_TOPIC),
            *self._with_prefix(naming.CHECK_PREFIX),
        ]
        candidates = self._scan(
            life, system, lambda r: r.key() == wanted or is_it(r) or wanted in (r.value() or b"")
        )
        destinations = set(topics)
        for record, decoded in self._decoded(life, candidates):
            place, at = place_of(record), stored_at(record)
            if isinstance(decoded, HalfMessage) and decoded.transaction_id == msg_id:
                life.steps.append(lifecycle.born(decoded.born_timestamp, decoded.producer_group))
                life.steps.append(lifecycle.half_stored(place, at, decoded))
                destinations.add(decoded.topic)
            elif isinstance(decoded, EndTransaction) and decoded.transaction_id == msg_id:
                life.steps.append(lifecycle.decided(place, at, decoded))
            elif isinstance(decoded, OpRecord) and decoded.transaction_id == msg_id:
                life.steps.append(lifecycle.applied(place, at, decoded))
            elif isinstance(decoded, CheckRequest) and decoded.transaction_id == msg_id:
                life.steps.append(lifecycle.check_asked(place, at, decoded))
            elif isinstance(decoded, ScheduledMessage) and decoded.unique_key == msg_id:
                life.steps.append(lifecycle.scheduled(place, at, decoded))
                if not naming.is_retry_topic(decoded.topic):
                    destinations.add(decoded.topic)
        consumers = [*self._with_prefix(naming.RETRY_PREFIX), *self._with_prefix(naming.DLQ_PREFIX)]
        sent_to = [naming.kafka_topic(t) for t in sorted(destinations)]
        if self._index is not None:  # the index knows where it was delivered: no --topic needed
            sent_to += [t for t, _p in self._index.high_water() if t not in sent_to]
        deliveries: list[Place] = []
        wanted_places = [*sent_to, *(t for t in consumers if t not in sent_to)]
        for record in self._scan(life, wanted_places, is_it, {"msg_id": msg_id}):
            place, at = place_of(record), stored_at(record)
            if place.topic.startswith(naming.DLQ_PREFIX):
                reason = header_text(record, DLQ_REASON) or "no reason recorded"
                life.steps.append(lifecycle.dead_lettered(place, at, reason))
            elif naming.is_retry_topic(place.topic):
                times = header_text(record, prop.RECONSUME_TIME) or "?"
                life.steps.append(lifecycle.retried(place, at, times))
            else:
                life.steps.append(lifecycle.delivered(place, at))
                deliveries.append(place)
        if deliveries:
            life.groups = self._group_states(deliveries)
        return life

    def _group_states(self, deliveries: list[Place]) -> list[str]:
        groups = Groups(self._conf, self._timeout_s)
        states = []
        for row in groups.rows():
            if row.system:
                continue
            group_id = row.group if row.instance is None else f"{row.group}@{row.instance}"
            committed = groups.committed(group_id)
            for place in deliveries:
                offset = committed.get((naming.kafka_topic(place.topic), place.partition))
                if offset is not None:
                    states.append(lifecycle.consumed_by(group_id, offset, place))
        return states or ["no consumer group has committed on its queue"]

    def query(self, topic: str, key: str | None, tag: str | None) -> tuple[list[KafkaRecord], Life]:
        """The records of ``topic`` in the window with key ``key`` (one of its ``KEYS``) and
        tag ``tag`` (each when given)."""
        life = Life()
        kafka_topic = naming.kafka_topic(topic)
        if kafka_topic not in self._topics:
            raise AdapterError(f"topic {topic!r} does not exist")
        lookup = {"key": key, "tag": tag} if key is not None or tag is not None else None
        return self._scan(life, [kafka_topic], by_key_and_tag(key, tag), lookup), life
