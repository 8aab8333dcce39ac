"""The schedule forwarder: RocketMQ's ``ScheduleMessageService`` as a Kafka worker, exactly once.

Reproduces the delivery of delayed messages (reference sections 2.3 to 2.6): each level of
``SCHEDULE_TOPIC_XXXX`` (partition = level - 1) is read in store order; a record is due at its
LogAppendTime + the level's delay (with the clock-jump correction); due records are restored
to their real topic and queue. Beyond RocketMQ:

- exactly once: the deliveries of a batch and the consumed positions are committed in one Kafka
  transaction (RocketMQ persists progress every 10 s and replays up to 10 s after a crash);
- on time: a level whose head is not due is paused and the worker waits exactly until the
  earliest head falls due (nothing is fetched or scanned meanwhile), then resumes it, instead
  of re-scanning every 100 ms;
- scale-out: workers share the level partitions through the consumer group
  ``CID_RMQ_SYS_SCHEDULE``; each has its own transactional id, and a zombie is fenced;
- a real topic that refuses a delivery is retried with back-off (tenacity's wait strategy)
  while the other levels go on; a record that can never be delivered (corrupt, or addressed to a
  system topic, or too large) is parked in ``RMQ_SYS_POISON_TOPIC`` with the reason, in the same
  transaction, instead of blocking its level forever or being dropped (:func:`plan_batch`).

Known gaps: a level's records are held in memory from fetch until due (bounded by the fetch
size, since a partition with records waiting is paused). A record whose ``REAL_QID`` is not a
partition of its real topic goes to any partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tenacity
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.config import ForwarderConfig
from adapter.exceptions import AdapterError
from adapter.kafka import clients, io, schemas
from adapter.kafka.io import caught_up, fetch
from adapter.kafka.topics import check_schedule_partitions
from adapter.kafka.worker import ExactlyOnceWorker, parked_headers
from adapter.message import Delivery
from adapter.schedule.due import corrected_due_ms, due_ms
from adapter.schedule.envelope import delivered
from adapter.schedule.head_of_line import Entry, HeadOfLine
from adapter.schedule.metrics import ForwarderMetrics
from adapter.wire import codec
from adapter.wire.records import ScheduledMessage

log = logging.getLogger("adapter.schedule")

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)

# Delivery errors that no retry can cure: the record is parked instead.
_PERMANENT = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_EXCEPTION,
    }
)
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
_BACKOFF = tenacity.wait_exponential(multiplier=0.1, max=30) + tenacity.wait_random(0, 0.1)

Held = Entry[bytes]
"""A SCHEDULE record held until due: its level partition, offset, due time and value."""


def backoff_s(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based) of a refused delivery."""
    state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    state.attempt_number = attempt
    return float(_BACKOFF(state))


@dataclass(frozen=True, slots=True)
class Send:
    """One record of a batch: a delivery to its real topic, or (``delivery`` None) the SCHEDULE
    record parked in the poison topic with ``reason``."""

    entry: Held
    topic: str
    partition: int | None
    delivery: Delivery | None
    reason: str | None


@dataclass(slots=True)
class Batch:
    """One transaction's work: what to produce, the positions it consumes, what waits."""

    sends: list[Send] = field(default_factory=list)
    positions: dict[int, int] = field(default_factory=dict)
    put_back: list[Held] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)
    """Levels whose real topic is not there, with the reason; they wait and retry."""

    @property
    def entries(self) -> list[Held]:
        return [send.entry for send in self.sends]


def plan_batch(
    entries: Sequence[Held],
    *,
    doomed: dict[tuple[int, int], str],
    partitions: Callable[[str], int],
    lookup: codec.SchemaSource | None = None,
) -> Batch:
    """What to do with due records (pure): deliver each to its real topic; park the ones that
    can never be delivered (not decodable, addressed to a system topic, or ``doomed`` by an
    earlier refusal no retry cures), with the reason; and, for a level whose real topic does
    not exist (``partitions`` returns 0), put the record and the rest of its level back, so
    the level is retried later while the others go on."""
    batch = Batch()
    for entry in entries:
        if entry.partition in batch.refused:
            batch.put_back.append(entry)
            continue
        reason = doomed.pop((entry.partition, entry.offset), None)
        delivery: Delivery | None = None
        topic, partition = POISON, None
        if reason is None:
            try:
                record = codec.decode_as(
                    ScheduledMessage, entry.item, canonical=False, lookup=lookup
                )
                delivery = delivered(record)
                topic = naming.sendable_kafka_topic(delivery.topic)
            except AdapterError as exc:
                reason, delivery = exc.reason, None
        if delivery is not None:
            count = partitions(topic)
            if not count:
                batch.refused[entry.partition] = f"topic {delivery.topic!r} is not available"
                batch.put_back.append(entry)
                continue
            if 0 <= delivery.queue_id < count:
                partition = delivery.queue_id
        batch.sends.append(Send(entry, topic, partition, delivery, reason))
        batch.positions[entry.partition] = entry.offset + 1
    return batch


class ScheduleForwarder(ExactlyOnceWorker[ForwarderConfig]):
    """``run()`` until ``stop()``; or drive it with ``start()``, ``run_once()``, ``close()``."""

    name = "schedule forwarder"
    log = log

    def setup(self) -> None:
        self.metrics = ForwarderMetrics(self.registry)
        self._heads: HeadOfLine[bytes] = HeadOfLine()
        self._assigned: set[int] = set()
        self._paused: set[int] = set()
        self._attempts: dict[int, int] = {}
        self._doomed: dict[tuple[int, int], str] = {}
        self._lookup = schemas.lookup_for(self.config.kafka)
        self._failed: list[tuple[Held, KafkaError]] = []
        self._next_backlog_update = 0.0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        io.require_visible(self.config.kafka.librdkafka({}), [SCHEDULE], "READ", 10.0)
        check_schedule_partitions(self.topics, self.config.levels)
        schemas.install(self.config.kafka).wait(schemas.START_WAIT_S)
        consumer = clients.consumer(self.config.consumer(naming.SCHEDULE_FORWARDER_GROUP))
        consumer.subscribe(
            [SCHEDULE], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._consumer = consumer
        log.info(
            "schedule forwarder %s started: %d levels",
            self.config.worker_id,
            self.config.levels.max_level,
        )

    # -- one turn of the loop ---------------------------------------------------------------

    def run_once(self) -> int:
        """Fetch, forward what is due in one transaction; return how many records moved."""
        consumer = self.consumer()
        now = self.clock.now_ms()
        wakeup = self._heads.next_wakeup_ms()
        wait_ms = self.config.max_wait_ms if wakeup is None else max(0, wakeup - now)
        records = fetch(
            consumer, self.config.max_batch, min(wait_ms, self.config.max_wait_ms) / 1000
        )
        for record in records:
            self._accept(record)
        moved = 0
        entries = self._heads.take_due(self.clock.now_ms(), self.config.max_batch)
        if entries:
            moved = self._forward(entries)
        self._update_pauses()
        if self.clock.monotonic() >= self._next_backlog_update:
            self._next_backlog_update = self.clock.monotonic() + 1.0
            self.update_backlog()
        return moved

    def idle(self) -> bool:
        now = self.clock.now_ms()
        waiting = [p for p in self._assigned if self._heads.head_waits(p, now)]
        due = self._heads.next_wakeup_ms()
        if not self.assigned_once or (due is not None and due <= now):
            return False
        levels = [TopicPartition(SCHEDULE, p) for p in sorted(self._assigned - set(waiting))]
        return caught_up(self.consumer(), levels, timeout_s=10)

    def _accept(self, record: KafkaRecord) -> None:
        if not self.usable(record):
            return
        partition = record.partition()
        if partition not in self._assigned:
            return
        level = partition + 1
        _, store_ms = record.timestamp()
        levels = self.config.levels
        now = self.clock.now_ms()
        due = corrected_due_ms(due_ms(store_ms, level, levels), now, level, levels)
        self._heads.push(Entry(partition, record.offset() or 0, due, record.value() or b""))

    def _update_pauses(self) -> None:
        """Pause each level whose head is not due; resume it once the head is due."""
        consumer = self.consumer()
        now = self.clock.now_ms()
        waits = self._heads.head_waits
        pause = [p for p in self._assigned if p not in self._paused and waits(p, now)]
        resume = [p for p in self._paused if not waits(p, now)]
        if pause:
            consumer.pause([TopicPartition(SCHEDULE, p) for p in pause])
            self._paused.update(pause)
        if resume:
            consumer.resume([TopicPartition(SCHEDULE, p) for p in resume])
            self._paused.difference_update(resume)

    # -- forwarding -------------------------------------------------------------------------

    def _forward(self, entries: Sequence[Held]) -> int:
        # Asked by name, as the old per-topic lookup did: a broker that creates topics on first
        # use creates a delayed message's real topic, as RocketMQ's autoCreateTopicEnable does.
        batch = plan_batch(
            entries,
            doomed=self._doomed,
            partitions=lambda topic: self.topics.count(topic, create=True),
            lookup=self._lookup,
        )
        self._heads.put_back(batch.put_back)
        for partition, why in batch.refused.items():
            self._refuse(partition, why)
        if not batch.sends:
            return 0
        self._failed = []
        try:
            self._transact(batch)
        except (KafkaException, AdapterError) as exc:
            self._heads.put_back(batch.entries)  # nothing of the batch was committed
            if not self._recover(exc, batch):
                raise  # not about some records: the turn failed (Kafka unreachable, ...)
            return 0
        self._committed(batch)
        return len(batch.sends)

    def _transact(self, batch: Batch) -> None:
        """Produce the batch and commit it with its consumed positions, in one transaction."""
        self.tx.begin()
        for send in batch.sends:
            self._produce(send)
        positions = [TopicPartition(SCHEDULE, p, o) for p, o in batch.positions.items()]
        self.tx.commit(positions, self.consumer())

    def _produce(self, send: Send) -> None:
        entry = send.entry

        def report(error: KafkaError | None, _record: KafkaRecord) -> None:
            if error is not None:
                self._failed.append((entry, error))

        kwargs: dict[str, Any] = {"on_delivery": report}
        delivery = send.delivery
        if delivery is None:
            kwargs["headers"] = parked_headers(
                send.reason or "", SCHEDULE, entry.partition, entry.offset
            )
            value = entry.item
        else:
            kwargs["headers"] = delivery.headers
            if delivery.key is not None:
                kwargs["key"] = delivery.key
            if send.partition is not None:
                kwargs["partition"] = send.partition
            value = delivery.value
        try:
            self.tx.produce(send.topic, value, **kwargs)
        except KafkaException as exc:
            if exc.args[0].code() in _PERMANENT:
                self._doomed[(entry.partition, entry.offset)] = f"refused: {exc.args[0].str()}"
            raise

    def _recover(self, exc: BaseException, batch: Batch) -> bool:
        """Abort the failed transaction; True when some of its records were refused (those
        levels then wait and retry, a record no retry cures is parked next time)."""
        self.tx.fail(exc)
        refused: set[int] = set()
        for entry, failure in self._failed:
            if failure.code() in _PURGED:  # purged by the abort, not refused
                continue
            if failure.code() in _PERMANENT:
                self._doomed[(entry.partition, entry.offset)] = f"refused: {failure.str()}"
            else:
                refused.add(entry.partition)
        for partition in refused:
            self._refuse(partition, str(exc))
        return bool(refused) or any(key[0] in batch.positions for key in self._doomed)

    def _refuse(self, partition: int, why: str) -> None:
        attempt = self._attempts.get(partition, 0) + 1
        self._attempts[partition] = attempt
        wait = backoff_s(attempt)
        self._heads.block(partition, self.clock.now_ms() + int(wait * 1000))
        self.metrics.refused.labels(str(partition + 1)).inc()
        log.warning(
            "level %d: delivery refused (%s); retry %d in %.2f s",
            partition + 1,
            why,
            attempt,
            wait,
        )

    def _committed(self, batch: Batch) -> None:
        now = self.clock.now_ms()
        forwarded: dict[int, int] = {}
        observe = self.metrics.lateness.observe
        for send in batch.sends:
            entry = send.entry
            if send.delivery is not None:
                forwarded[entry.partition] = forwarded.get(entry.partition, 0) + 1
                observe(max(0, now - entry.due_ms) / 1000)
                continue
            self.metrics.parked.labels((send.reason or "unknown").split(":", 1)[0]).inc()
            log.error(
                "parked level %d offset %d in %s: %s",
                entry.partition + 1,
                entry.offset,
                naming.POISON_TOPIC,
                send.reason,
            )
        for partition, count in forwarded.items():
            self.metrics.forwarded.labels(str(partition + 1)).inc(count)
        for partition in batch.positions:
            self._attempts.pop(partition, None)
            self._heads.unblock(partition)

    # -- group membership -------------------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if not self.current(consumer):
            return
        # A level paused before it was lost may come back still paused in librdkafka, while
        # _forget() dropped it from _paused: nothing would ever resume it.
        if partitions:
            consumer.resume(partitions)
        self._assigned.update(tp.partition for tp in partitions)
        self.assigned_once = True
        log.info("assigned levels %s", sorted(tp.partition + 1 for tp in partitions))

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if self.current(consumer):
            self._forget(partitions, "revoked")

    def _on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if self.current(consumer):
            self._forget(partitions, "lost", logging.WARNING)

    def forget_partitions(self) -> None:
        self._forget([TopicPartition(SCHEDULE, p) for p in sorted(self._assigned)], "dropped")

    def _forget(
        self, partitions: list[TopicPartition], how: str, level: int = logging.INFO
    ) -> None:
        """Drop what is held for these levels: their next owner reads them again from the
        committed positions."""
        for tp in partitions:
            self._assigned.discard(tp.partition)
            self._paused.discard(tp.partition)
            self._attempts.pop(tp.partition, None)
            self._heads.drop(tp.partition)
        log.log(level, "%s levels %s", how, sorted(tp.partition + 1 for tp in partitions))

    # -- observability ----------------------------------------------------------------------

    def update_backlog(self) -> dict[int, int]:
        """Refresh the backlog gauge from the consumer's positions and cached end offsets."""
        consumer = self._consumer
        if consumer is None:
            return {}
        backlog: dict[int, int] = {}
        assigned = [TopicPartition(SCHEDULE, p) for p in sorted(self._assigned)]
        waiting = self._heads.waiting()
        for tp in consumer.position(assigned):
            _, high = consumer.get_watermark_offsets(tp, cached=True)
            position = tp.offset if tp.offset >= 0 else high
            backlog[tp.partition] = max(0, high - position) + waiting.get(tp.partition, 0)
            self.metrics.backlog.labels(str(tp.partition + 1)).set(backlog[tp.partition])
        return backlog
