"""Reading and writing Kafka the way every part of the adapter does, written once.

Not a RocketMQ behaviour: RocketMQ's broker reads its own commit log and its clients wait on
request futures. Here the same few Kafka patterns recur, and each lives here:

- :func:`fetch`: up to n records as soon as one is there (librdkafka's ``consume(n, t)`` waits
  for n records or the whole timeout, which would add the timeout to every delivery);
- :func:`read_to_end`: one or more partitions from an offset to their end, committed records
  only. The end is the log's end when reading begins, open transactions included: a
  transaction that committed a moment ago may not have its markers on every partition yet,
  and the last stable offset would stop short of its records. An open transaction is waited
  for until it ends (Kafka aborts a dead worker's after its transaction timeout);
- :func:`produce` and :func:`produce_and_ack`: produce while the local queue is full, within a
  deadline; produce one record and wait for its acknowledgement;
- :class:`PartitionCounts`: topics' partition counts, cached, never creating a topic by asking;
- :func:`committed_offsets`: a group's committed offsets;
- :func:`require_visible`: the topics a command needs, or a clear error naming the permission;
- :func:`decode`: a system record out of a Kafka record, errors located at the record.

Known gaps: none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import tenacity
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError, CodecError, DeliveryError, LocalQueueFull
from adapter.kafka import clients
from adapter.wire import codec
from adapter.wire.records import Record

R = TypeVar("R", bound=Record)
T = TypeVar("T")

READER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
}


def keep_trying(
    call: Callable[[], T],
    *,
    when: Callable[[BaseException], bool],
    every_s: float,
    for_s: float,
) -> T:
    """``call()``, called again every ``every_s`` seconds while it raises an error ``when``
    accepts, for up to ``for_s`` seconds; then that error."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(when),
        wait=tenacity.wait_fixed(every_s),
        stop=tenacity.stop_after_delay(for_s),
        reraise=True,
    )(call)


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
) -> Iterator[KafkaRecord]:
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
                    f"with group {_READ_BACK_GROUP} ({error.str()}; ACLs: README)",
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


def produce_kwargs(
    headers: Sequence[tuple[str, bytes]], partition: int | None, key: bytes | None
) -> dict[str, Any]:
    """The keyword arguments of ``produce`` beyond topic and value (partition and key only
    when given: librdkafka then chooses)."""
    kwargs: dict[str, Any] = {"headers": headers}
    if partition is not None:
        kwargs["partition"] = partition
    if key is not None:
        kwargs["key"] = key
    return kwargs


def produce(
    producer: Producer, topic: str, value: bytes | None, *, timeout_s: float, **kwargs: Any
) -> None:
    """``producer.produce``; while the local queue is full, serve delivery reports (which make
    room) for up to ``timeout_s``, then :class:`LocalQueueFull`."""
    try:
        producer.produce(topic, value, **kwargs)  # the usual case, without the retry machinery
        return
    except BufferError:
        pass
    try:
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(BufferError),
            wait=tenacity.wait_fixed(0.05),
            stop=tenacity.stop_after_delay(timeout_s),
            sleep=lambda seconds: _serve_reports(producer, seconds),
        ):
            with attempt:
                producer.produce(topic, value, **kwargs)
    except tenacity.RetryError as exc:
        raise LocalQueueFull(
            f"the local send queue stayed full for {timeout_s:g} s (sending to "
            f"{naming.decode(topic)})",
            topic=topic,
        ) from exc


def _serve_reports(producer: Producer, seconds: float) -> None:
    producer.poll(seconds)


class Ack:
    """One record's delivery report, as the ``on_delivery`` callback of its produce."""

    __slots__ = ("error", "partition", "offset", "done")

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self.partition = -1
        self.offset = -1
        self.done = threading.Event()

    def __call__(self, error: KafkaError | None, record: KafkaRecord) -> None:
        self.error = error
        if error is None:
            self.partition = record.partition() or 0
            self.offset = record.offset() or 0
        self.done.set()


def produce_and_ack(
    producer: Producer,
    topic: str,
    value: bytes | None,
    *,
    timeout_s: float,
    reports_served: bool = False,
    flush: bool = True,
    what: str = "",
    **kwargs: Any,
) -> Ack:
    """Produce one record and wait for Kafka's acknowledgement, up to ``timeout_s``.

    ``reports_served``: another thread polls ``producer`` and will run this record's report.
    Otherwise this call serves the reports itself: with ``flush``, it flushes, which also
    sends at once, ignoring ``linger.ms``, but waits for every record queued before it too;
    without, it polls until this record's report has come (give the producer no linger).

    Raises:
        DeliveryError: no acknowledgement in time, or Kafka refused the record
            (``kafka_error`` holds the cause). ``what`` names the record in the message.
    """
    ack = Ack()
    what = what or f"a record for {naming.decode(topic)}"
    produce(producer, topic, value, timeout_s=timeout_s, on_delivery=ack, **kwargs)
    if reports_served:
        ack.done.wait(timeout_s + 1.0)
    elif not flush:
        _serve_until(producer, ack, timeout_s + 1.0)
    else:
        try:
            producer.flush(timeout_s + 1.0)
        except SystemError as exc:
            # confluent-kafka raises a fatal error (a fenced transactional producer) out of
            # flush() as a SystemError whose cause is the KafkaException: raise that instead.
            if isinstance(exc.__cause__, KafkaException):
                raise exc.__cause__ from None
            raise
    if not ack.done.is_set():
        raise DeliveryError(f"no acknowledgement within {timeout_s:g} s for {what}", topic=topic)
    if ack.error is not None:
        why = ack.error.str()
        if ack.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            why += f" (the principal is not authorised to WRITE topic {naming.decode(topic)})"
        raise DeliveryError(f"Kafka refused {what}: {why}", topic=topic, kafka_error=ack.error)
    return ack


def _serve_until(producer: Producer, ack: Ack, timeout_s: float) -> None:
    """Serve ``producer``'s delivery reports (its others' too) until ``ack`` has come, up to
    ``timeout_s``: records queued before it, or stuck on another partition, are not waited
    for."""
    deadline = SYSTEM_CLOCK.monotonic() + timeout_s
    while not ack.done.is_set():
        remaining = deadline - SYSTEM_CLOCK.monotonic()
        if remaining <= 0:
            return
        producer.poll(min(remaining, 0.1))


def require_visible(
    conf: Mapping[str, Any], topics: Sequence[str], operation: str, timeout_s: float
) -> None:
    """Every Kafka topic of ``topics`` is visible to the principal of ``conf``; otherwise an
    ``AdapterError`` naming them and the permission ``operation`` the principal needs (a topic
    the principal may not describe is left out of the metadata, as a missing one is).
    :class:`KafkaUnavailableError` when Kafka cannot be reached within ``timeout_s``."""
    metadata = clients.reach(conf, timeout_s)
    hidden = [t for t in topics if t not in metadata.topics or metadata.topics[t].error is not None]
    if hidden:
        names = ", ".join(naming.decode(t) for t in hidden)
        raise AdapterError(
            f"cannot see topic {names}: the principal is not authorised to {operation} it, or it "
            "does not exist (ACLs: README; `rmq-adapter topics init` creates the system topics)"
        )


class MissingTopic(AdapterError):
    """The topic does not exist (or has no partitions)."""

    kind = "missing topic"


@dataclass(eq=False)
class PartitionCounts:
    """Partition counts of topics, cached: a count for ``ttl_s``, an absence for ``miss_ttl_s``.

    Asks for the list of all topics, never for one topic by name: a metadata request naming a
    missing topic makes a broker with ``auto.create.topics.enable`` create it, with the
    broker's default layout. :meth:`count` with ``create=True`` asks by name on purpose, to get
    RocketMQ's ``autoCreateTopicEnable`` behaviour for a producer's own topic."""

    list_topics: Callable[..., Any]
    """A client's ``list_topics``."""
    timeout_s: float
    ttl_s: float = 30.0
    miss_ttl_s: float = 1.0
    clock: Clock = SYSTEM_CLOCK
    _cache: dict[str, tuple[float, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, topic: str, *, create: bool = False) -> int:
        """``topic``'s partition count (a Kafka name); 0 when it does not exist."""
        now = self.clock.monotonic()
        cached = self._cache.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        if create:
            metadata = self.list_topics(topic, timeout=self.timeout_s)
        else:
            metadata = self.list_topics(timeout=self.timeout_s)
        found = metadata.topics.get(topic)
        count = len(found.partitions) if found is not None and found.error is None else 0
        with self._lock:
            self._cache[topic] = (now + (self.ttl_s if count else self.miss_ttl_s), count)
        return count

    def require(self, topic: str, *, create: bool = False, wait_s: float = 0.0) -> int:
        """``topic``'s partition count, waiting up to ``wait_s`` for a topic created a moment
        ago to appear; :class:`MissingTopic` otherwise."""

        def lookup() -> int:
            count = self.count(topic, create=create)
            if not count:
                raise MissingTopic(
                    f"topic {naming.decode(topic)!r} does not exist", topic=naming.decode(topic)
                )
            return count

        count = self.count(topic, create=create)
        if count:
            return count  # the usual case, on every send: no retry machinery
        return keep_trying(
            lookup, when=lambda exc: isinstance(exc, MissingTopic), every_s=0.1, for_s=wait_s
        )

    def forget(self, topic: str) -> None:
        with self._lock:
            self._cache.pop(topic, None)


def _coordinator_busy(exc: BaseException) -> bool:
    """The group coordinator is loading or moving (or the request timed out): ask again."""
    if not isinstance(exc, KafkaException):
        return False
    error: KafkaError = exc.args[0]
    return error.retriable() or error.code() in _COORDINATOR_BUSY


_COORDINATOR_BUSY = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT}
)


def committed_offsets(
    conf: Mapping[str, Any], group: str, partitions: list[TopicPartition], timeout_s: float = 30
) -> list[int]:
    """The group's committed offsets (-1001 where none), asking again for up to ``timeout_s``
    while its coordinator is busy. A consumer handle of that group asks, not the admin API:
    librdkafka's ListConsumerGroupOffsets crashed the process here when the group coordinator
    was still loading."""

    def ask() -> list[int]:
        asker = clients.consumer({**conf, "group.id": group, "enable.auto.commit": False})
        try:
            return [tp.offset for tp in asker.committed(partitions, timeout=timeout_s)]
        finally:
            asker.close()

    return keep_trying(ask, when=_coordinator_busy, every_s=0.5, for_s=timeout_s)


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
