"""Read the records of some topics stored within a time window, and count what was read.

Message queries are bounded by a window, as rocketmq-dashboard's are: Kafka finds each
partition's first offset at or after the window's start and the first after its end
(``offsets_for_times``), and only the records between are read (read_committed, as consumers
see them). The caller learns how many records were scanned, so that a slow query says why.
A query answered by the message index scans only what is newer than the index (``after``), and
reads the records the index found by their place (:func:`fetch`).

Known gaps: a transaction still open at the window's end holds its partition's reading until
it ends or the deadline passes (read_committed stops at it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError
from adapter.kafka import clients
from adapter.kafka.reading import READER_SETTINGS

_GROUP = "rmq-adapter-query"


@dataclass
class Scanned:
    """The matching records, and how many records and partitions were read to find them."""

    found: list[KafkaRecord] = field(default_factory=list)
    records: int = 0
    partitions: int = 0


def _bounds(
    reader: Any,
    partitions: list[TopicPartition],
    when_ms: int,
    ends: dict[Any, int],
    timeout_s: float,
) -> dict[tuple[str, int], int]:
    asked = [TopicPartition(tp.topic, tp.partition, when_ms) for tp in partitions]
    answer = reader.offsets_for_times(asked, timeout=timeout_s)
    return {
        (tp.topic, tp.partition): tp.offset if tp.offset >= 0 else ends[(tp.topic, tp.partition)]
        for tp in answer
    }


def scan(
    conf: Mapping[str, Any],
    kafka_topics: Iterable[str],
    begin_ms: int,
    end_ms: int,
    match: Callable[[KafkaRecord], bool],
    timeout_s: float,
    clock: Clock = SYSTEM_CLOCK,
    after: Mapping[tuple[str, int], int] | None = None,
) -> Scanned:
    """The records of ``kafka_topics`` stored in [``begin_ms``, ``end_ms``) that ``match``,
    only from offset ``after[(kafka topic, partition)]`` on where given; ``AdapterError`` when
    the window is not read within ``timeout_s``."""
    result = Scanned()
    reader = clients.consumer({"group.id": _GROUP, **conf, **READER_SETTINGS})
    try:
        metadata = reader.list_topics(timeout=timeout_s).topics
        partitions = [
            TopicPartition(topic, p)
            for topic in kafka_topics
            if topic in metadata and metadata[topic].error is None
            for p in sorted(metadata[topic].partitions)
        ]
        if not partitions:
            return result
        ends = {
            (tp.topic, tp.partition): reader.get_watermark_offsets(tp, timeout_s, cached=False)[1]
            for tp in partitions
        }
        starts = _bounds(reader, partitions, begin_ms, ends, timeout_s)
        stops = _bounds(reader, partitions, end_ms, ends, timeout_s)
        for key, start in (after or {}).items():
            if key in starts:
                starts[key] = max(starts[key], start)
        open_ = {key for key in starts if starts[key] < stops[key]}
        result.partitions = len(open_)
        if not open_:
            return result
        reader.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in sorted(open_)])
        deadline = clock.monotonic() + timeout_s
        while open_ and clock.monotonic() < deadline:
            record = reader.poll(0.2)
            if record is None:
                continue
            key = (record.topic() or "", record.partition() or 0)
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    open_.discard(key)
                elif error.fatal() or not error.retriable():
                    raise AdapterError(f"cannot read {naming.decode(key[0])}: {error.str()}")
                continue
            if key not in open_:
                continue
            if (record.offset() or 0) >= stops[key]:
                open_.discard(key)
                continue
            result.records += 1
            if match(record):
                result.found.append(record)
            if (record.offset() or 0) + 1 >= stops[key]:
                open_.discard(key)
        if open_:
            held = ", ".join(f"{naming.decode(t)}[{p}]" for t, p in sorted(open_))
            raise AdapterError(
                f"the window was not read within {timeout_s:g} s (still reading {held}): "
                "narrow it with --begin/--end, or give a longer --timeout"
            )
        return result
    finally:
        reader.close()


Place = tuple[str, int, int]
"""A record's place: Kafka topic, partition, offset."""


def fetch(
    conf: Mapping[str, Any],
    places: Iterable[Place],
    timeout_s: float,
    clock: Clock = SYSTEM_CLOCK,
) -> tuple[list[KafkaRecord], list[Place]]:
    """The committed records at ``places`` (each read by seeking to it), and the places that
    hold none (deleted by retention, or an aborted transaction's); ``AdapterError`` when they
    are not read within ``timeout_s``."""
    wanted: dict[tuple[str, int], list[int]] = {}
    for topic, partition, offset in sorted(set(places)):
        wanted.setdefault((topic, partition), []).append(offset)
    found: list[KafkaRecord] = []
    missing: list[Place] = []
    if not wanted:
        return found, missing
    reader = clients.consumer({"group.id": _GROUP, **conf, **READER_SETTINGS})
    try:
        reader.assign([TopicPartition(t, p, offsets[0]) for (t, p), offsets in wanted.items()])
        deadline = clock.monotonic() + timeout_s
        while wanted and clock.monotonic() < deadline:
            record = reader.poll(0.2)
            if record is None:
                continue
            key = (record.topic() or "", record.partition() or 0)
            offsets = wanted.get(key)
            if offsets is None:
                continue
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    missing += [(*key, o) for o in offsets]
                    del wanted[key]
                    reader.incremental_unassign([TopicPartition(*key)])
                elif error.fatal() or not error.retriable():
                    raise AdapterError(f"cannot read {naming.decode(key[0])}: {error.str()}")
                continue
            offset = record.offset() or 0
            if offset < offsets[0]:
                continue
            while offsets and offsets[0] < offset:
                missing.append((*key, offsets.pop(0)))
            if offsets and offsets[0] == offset:
                found.append(record)
                offsets.pop(0)
            if not offsets:
                del wanted[key]
                reader.incremental_unassign([TopicPartition(*key)])
            elif offsets[0] > offset + 1:
                reader.seek(TopicPartition(*key, offsets[0]))
        if wanted:
            held = ", ".join(f"{naming.decode(t)}[{p}]" for t, p in sorted(wanted))
            raise AdapterError(
                f"the indexed records were not read within {timeout_s:g} s (still reading "
                f"{held}): give a longer --timeout"
            )
        return found, missing
    finally:
        reader.close()
