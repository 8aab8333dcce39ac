"""Reading Kafka the way every part of the adapter does, written once.

Not a RocketMQ behaviour: RocketMQ's broker reads its own commit log. Here the same few
Kafka reading patterns recur, and each lives here:

- :func:`fetch`: up to n records as soon as one is there (librdkafka's ``consume(n, t)`` waits
  for n records or the whole timeout, which would add the timeout to every delivery);
- :func:`read_to_end`: one or more partitions from an offset to their end, committed records
  only. The end is the log's end when reading begins, open transactions included: a
  transaction that committed a moment ago may not have its markers on every partition yet,
  and the last stable offset would stop short of its records. An open transaction is waited
  for until it ends (Kafka aborts a dead worker's after its transaction timeout);
- :func:`caught_up`: whether a consumer has read its partitions to their end;
- :func:`decode`: a system record out of a Kafka record, errors located at the record.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError, CodecError
from adapter.kafka import clients
from adapter.wire import codec
from adapter.wire.records import Record

R = TypeVar("R", bound=Record)

READER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
}


def fetch(consumer: Consumer, max_records: int, timeout_s: float) -> list[KafkaRecord]:
    """Up to ``max_records`` records as soon as one is there; ``[]`` after ``timeout_s``."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    if max_records <= 1:
        return [first]
    return [first, *consumer.consume(max_records - 1, 0)]


_READ_BACK_GROUP = "rmq-adapter-read-back"
_NOT_AUTHORISED = frozenset(
    {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}
)


def read_to_end(
    conf: Mapping[str, Any],
    topic: str,
    starts: dict[int, int],
    timeout_s: float,
    clock: Clock = SYSTEM_CLOCK,
) -> Generator[KafkaRecord, None, None]:
    """Every committed record of the partitions of ``topic`` named in ``starts``, each from
    its start offset (its first record when negative) to the end its log had when reading
    began; ``AdapterError`` if that takes longer than ``timeout_s`` (a transaction left open
    past it)."""
    if not starts:
        return
    deadline = clock.monotonic() + timeout_s
    ends = log_ends(conf, topic, list(starts), timeout_s)
    reader = clients.consumer({"group.id": _READ_BACK_GROUP, **conf, **READER_SETTINGS})
    try:
        reader.assign(
            [TopicPartition(topic, p, start if start >= 0 else -2) for p, start in starts.items()]
        )
        open_partitions = set(starts)
        stable: dict[int, int] = {}
        while clock.monotonic() < deadline:
            record = reader.poll(0.2)
            if record is None:
                continue
            error = record.error()
            if error is None:
                yield record
            elif error.code() == KafkaError._PARTITION_EOF:
                # EOF comes at the last stable offset, again each time it moves
                partition = record.partition() or 0
                stable[partition] = record.offset() or 0
                if stable[partition] >= ends[partition]:
                    open_partitions.discard(partition)
                if not open_partitions:
                    return
            elif error.code() in _NOT_AUTHORISED:
                raise AdapterError(
                    f"the principal is not authorised to READ topic {naming.decode(topic)} "
                    f"with group {_READ_BACK_GROUP} ({error.str()}; ACLs: docs/production.md)",
                    topic=topic,
                )
            elif error.fatal() or not error.retriable():
                raise KafkaException(error)
        held = ", ".join(
            f"{p} at {stable[p]} of {ends[p]}" for p in sorted(open_partitions) if p in stable
        )
        why = f" (an open transaction holds partitions {held})" if held else ""
        raise AdapterError(
            f"{naming.decode(topic)} could not be read back within {timeout_s:g} s{why}",
            topic=topic,
        )
    finally:
        reader.close()


def log_ends(
    conf: Mapping[str, Any], topic: str, partitions: list[int], timeout_s: float
) -> dict[int, int]:
    """The end offset of each of ``partitions`` of ``topic``, records of open transactions
    included (a read_committed client is told the last stable offset instead)."""
    probe = clients.consumer(
        {
            "group.id": _READ_BACK_GROUP,
            **conf,
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout_s, cached=False)[1]
            for p in partitions
        }
    finally:
        probe.close()


def decode(
    cls: type[R],
    record: KafkaRecord,
    *,
    canonical: bool = False,
    lookup: codec.SchemaSource | None = None,
) -> R:
    """The system record of type ``cls`` in ``record``'s value (an unknown schema is looked up
    with ``lookup``); a :class:`CodecError` names the topic, partition and offset it came
    from and keeps the raw bytes."""
    try:
        return codec.decode_as(cls, record.value() or b"", canonical=canonical, lookup=lookup)
    except CodecError as exc:
        raise exc.located(
            naming.decode(record.topic() or ""), record.partition() or 0, record.offset() or 0
        ) from None


def caught_up(consumer: Consumer, partitions: list[TopicPartition], timeout_s: float) -> bool:
    """The consumer has read each of ``partitions`` to its end (its position, or the group's
    committed offset before anything was read, is at the end offset)."""
    if not partitions:
        return True
    positions = consumer.position(partitions)
    unknown = [tp for tp in positions if tp.offset < 0]
    committed = (
        {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(unknown, timeout_s)}
        if unknown
        else {}
    )
    for tp in positions:
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False)
        position = tp.offset if tp.offset >= 0 else committed.get((tp.topic, tp.partition), -1)
        if max(position, low) < high:
            return False
    return True


def header_text(record: KafkaRecord, name: str) -> str | None:
    """The first ``name`` header of ``record`` as text (bytes that are not UTF-8 escaped)."""
    return first_header(record.headers() or [], name)


def first_header(headers: Iterable[Sequence[Any]], name: str) -> str | None:
    """The first ``name`` of ``headers`` (``(name, value)`` pairs) as text, as
    :func:`header_text` reads a record's."""
    for item in headers:
        key, value = item[0], item[1]
        if key == name and value is not None:
            raw = value.encode() if isinstance(value, str) else value
            return str(raw.decode("utf-8", errors="backslashreplace"))
    return None
