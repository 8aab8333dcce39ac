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
  transaction, instead of blocking its level forever or being dropped.

Known gaps: a level's records are held in memory from fetch until due (bounded by the fetch
size, since a partition with records waiting is paused). A record whose ``REAL_QID`` is not a
partition of its real topic goes to any partition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import tenacity
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaRecord
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from adapter import codec, naming
from adapter.config import ForwarderConfig
from adapter.exceptions import AdapterError, CodecError
from adapter.fetch import fetch
from adapter.records import ScheduledMessage
from adapter.schedule.due import corrected_due_ms, due_ms
from adapter.schedule.envelope import Delivery, delivered
from adapter.schedule.head_of_line import Entry, HeadOfLine
from adapter.topics import check_schedule_partitions, schedule_partitions
from adapter.transactional_worker import TransactionalWorker, now_ms, parked_headers, produce

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
_TOPIC_CACHE_S = 30.0


def backoff_s(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based) of a refused delivery."""
    state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    state.attempt_number = attempt
    return float(_BACKOFF(state))


class ForwarderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.backlog = Gauge(
            "rmq_schedule_backlog",
            "Records of a level not yet forwarded (end offset - position).",
            ["level"],
            registry=registry,
        )
        self.forwarded = Counter(
            "rmq_schedule_forwarded",
            "Records forwarded to their real topic.",
            ["level"],
            registry=registry,
        )
        self.lateness = Histogram(
            "rmq_schedule_lateness_seconds",
            "Commit time of a forwarded record minus its due time.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=registry,
        )
        self.parked = Counter(
            "rmq_schedule_parked",
            "Records parked in the poison topic.",
            ["reason"],
            registry=registry,
        )
        self.refused = Counter(
            "rmq_schedule_refused",
            "Deliveries refused by a real topic and retried with back-off.",
            ["level"],
            registry=registry,
        )


@dataclass(slots=True)
class _Batch:
    """One transaction's work: what to produce, and the positions it consumes."""

    sends: list[tuple[Entry[KafkaRecord], str, int | None, Delivery | None, str | None]] = field(
        default_factory=list
    )
    positions: dict[int, int] = field(default_factory=dict)
    put_back: list[Entry[KafkaRecord]] = field(default_factory=list)

    @property
    def entries(self) -> list[Entry[KafkaRecord]]:
        return [send[0] for send in self.sends]


class ScheduleForwarder(TransactionalWorker):
    """``run()`` until ``stop()``; or drive it with ``start()``, ``run_once()``, ``close()``."""

    name = "schedule forwarder"
    log = log

    def __init__(self, config: ForwarderConfig, registry: CollectorRegistry | None = None) -> None:
        super().__init__(config.worker_id, config.kafka_transaction_timeout_ms, config.producer)
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.metrics = ForwarderMetrics(self.registry)
        self._heads: HeadOfLine[KafkaRecord] = HeadOfLine()
        self._assigned: set[int] = set()
        self._paused: set[int] = set()
        self._attempts: dict[int, int] = {}
        self._doomed: dict[tuple[int, int], str] = {}
        self._partitions: dict[str, tuple[float, int | None]] = {}
        self._failed: list[tuple[Entry[KafkaRecord], KafkaError]] = []
        self._next_backlog_update = 0.0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        producer = self._new_producer()
        self._producer = producer
        check_schedule_partitions(schedule_partitions(producer, 30), self.config.levels)
        consumer = Consumer(self.config.consumer(naming.SCHEDULE_FORWARDER_GROUP), logger=log)
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
        producer, consumer = self._clients()
        now = now_ms()
        wakeup = self._heads.next_wakeup_ms()
        wait_ms = self.config.max_wait_ms if wakeup is None else max(0, wakeup - now)
        records = fetch(
            consumer, self.config.max_batch, min(wait_ms, self.config.max_wait_ms) / 1000
        )
        for record in records:
            self._accept(record)
        moved = 0
        entries = self._heads.take_due(now_ms(), self.config.max_batch)
        if entries:
            moved = self._forward(entries)
        self._update_pauses(consumer)
        if time.monotonic() >= self._next_backlog_update:
            self._next_backlog_update = time.monotonic() + 1.0
            self.update_backlog()
        return moved

    def _accept(self, record: KafkaRecord) -> None:
        error = record.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            log.warning("consumer error: %s", error)
            return
        partition = record.partition()
        if partition not in self._assigned:
            return
        level = partition + 1
        _, store_ms = record.timestamp()
        levels = self.config.levels
        due = corrected_due_ms(due_ms(store_ms, level, levels), now_ms(), level, levels)
        self._heads.push(Entry(partition, record.offset() or 0, due, record))

    def _update_pauses(self, consumer: Consumer) -> None:
        """Pause each level whose head is not due; resume it once the head is due."""
        now = now_ms()
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

    def _plan(self, entries: Sequence[Entry[KafkaRecord]]) -> _Batch:
        batch = _Batch()
        blocked: set[int] = set()
        for entry in entries:
            if entry.partition in blocked:
                batch.put_back.append(entry)
                continue
            reason = self._doomed.pop((entry.partition, entry.offset), None)
            delivery: Delivery | None = None
            topic, partition = POISON, None
            if reason is None:
                try:
                    value = entry.item.value() or b""
                    delivery = delivered(codec.decode_as(ScheduledMessage, value, canonical=False))
                    topic = naming.sendable_kafka_topic(delivery.topic)
                except CodecError as exc:
                    reason = f"corrupt: {exc}"
                except AdapterError as exc:
                    reason = f"undeliverable: {exc}"
            if reason is None and delivery is not None:
                count = self._partition_count(topic)
                if count is None:
                    self._refuse(entry.partition, f"topic {delivery.topic!r} is not available")
                    blocked.add(entry.partition)
                    batch.put_back.append(entry)
                    continue
                if 0 <= delivery.queue_id < count:
                    partition = delivery.queue_id
            if reason is not None:
                delivery = None
            batch.sends.append((entry, topic, partition, delivery, reason))
            batch.positions[entry.partition] = entry.offset + 1
        return batch

    def _forward(self, entries: Sequence[Entry[KafkaRecord]]) -> int:
        batch = self._plan(entries)
        self._heads.put_back(batch.put_back)
        if not batch.sends:
            return 0
        self._failed = []
        try:
            self._transact(batch)
        except KafkaException as exc:
            self._heads.put_back(batch.entries)  # nothing of the batch was committed
            self._recover(exc, batch)
            return 0
        self._committed(batch)
        return len(batch.sends)

    def _transact(self, batch: _Batch) -> None:
        """Produce the batch and commit it with its consumed positions, in one transaction."""
        producer, consumer = self._clients()
        producer.begin_transaction()
        for entry, topic, partition, delivery, reason in batch.sends:
            self._produce(producer, entry, topic, partition, delivery, reason)
        positions = [TopicPartition(SCHEDULE, p, o) for p, o in batch.positions.items()]
        timeout = self._timeout_s()
        self._retrying(
            lambda: producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), timeout
            )
        )
        self._retrying(lambda: producer.commit_transaction(timeout))

    def _produce(
        self,
        producer: Producer,
        entry: Entry[KafkaRecord],
        topic: str,
        partition: int | None,
        delivery: Delivery | None,
        reason: str | None,
    ) -> None:
        def report(error: KafkaError | None, _record: KafkaRecord) -> None:
            if error is not None:
                self._failed.append((entry, error))

        kwargs: dict[str, Any] = {"on_delivery": report}
        if delivery is None:
            kwargs["headers"] = parked_headers(
                reason or "", SCHEDULE, entry.partition, entry.offset
            )
            value = entry.item.value()
        else:
            kwargs["headers"] = delivery.headers
            if delivery.key is not None:
                kwargs["key"] = delivery.key
            if partition is not None:
                kwargs["partition"] = partition
            value = delivery.value
        try:
            produce(producer, topic, value, **kwargs)
        except KafkaException as exc:
            if exc.args[0].code() in _PERMANENT:
                self._doomed[(entry.partition, entry.offset)] = f"refused: {exc.args[0].str()}"
            raise

    def _recover(self, exc: KafkaException, batch: _Batch) -> None:
        """Abort the failed transaction and decide what to do with its records."""
        error: KafkaError = exc.args[0]
        self._fenced_if_fatal(error)
        log.warning("transaction of %d records aborted: %s", len(batch.sends), error.str())
        self._abort()
        refused: set[int] = set()
        for entry, failure in self._failed:
            if failure.code() in _PURGED:  # purged by the abort, not refused
                continue
            if failure.code() in _PERMANENT:
                self._doomed[(entry.partition, entry.offset)] = f"refused: {failure.str()}"
            else:
                refused.add(entry.partition)
        if not self._failed and not self._doomed:
            refused = set(batch.positions)
        for partition in refused:
            self._refuse(partition, error.str())

    def _refuse(self, partition: int, why: str) -> None:
        attempt = self._attempts.get(partition, 0) + 1
        self._attempts[partition] = attempt
        wait = backoff_s(attempt)
        self._heads.block(partition, now_ms() + int(wait * 1000))
        self.metrics.refused.labels(str(partition + 1)).inc()
        log.warning(
            "level %d: delivery refused (%s); retry %d in %.2f s",
            partition + 1,
            why,
            attempt,
            wait,
        )

    def _committed(self, batch: _Batch) -> None:
        now = now_ms()
        forwarded: dict[int, int] = {}
        observe = self.metrics.lateness.observe
        for entry, _topic, _partition, delivery, reason in batch.sends:
            if delivery is not None:
                forwarded[entry.partition] = forwarded.get(entry.partition, 0) + 1
                observe(max(0, now - entry.due_ms) / 1000)
                continue
            self.metrics.parked.labels((reason or "unknown").split(":", 1)[0]).inc()
            log.error(
                "parked level %d offset %d in %s: %s",
                entry.partition + 1,
                entry.offset,
                naming.POISON_TOPIC,
                reason,
            )
        for partition, count in forwarded.items():
            self.metrics.forwarded.labels(str(partition + 1)).inc(count)
        for partition in batch.positions:
            self._attempts.pop(partition, None)
            self._heads.unblock(partition)

    def _partition_count(self, topic: str) -> int | None:
        cached = self._partitions.get(topic)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        producer, _ = self._clients()
        try:
            metadata = producer.list_topics(topic, timeout=5)
            found = metadata.topics.get(topic)
            count = len(found.partitions) if found and found.error is None else None
        except KafkaException:
            count = None
        if count:
            self._partitions[topic] = (time.monotonic() + _TOPIC_CACHE_S, count)
        return count or None

    # -- group membership -------------------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.update(tp.partition for tp in partitions)
        log.info("assigned levels %s", sorted(tp.partition + 1 for tp in partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions, "revoked")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions, "lost", logging.WARNING)

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
