"""The transaction coordinator: RocketMQ's end-transaction and check-back as a Kafka worker.

Reproduces the broker side of transactional messages (reference sections 1.3 to 1.10): half
messages wait in ``RMQ_SYS_TRANS_HALF_TOPIC``; a producer's COMMIT delivers the message to its
real topic, ROLLBACK drops it; a message with no decision is checked with its producer group
and, after ``check_max`` checks or past the retention, parked in ``TRANS_CHECK_MAX_TIME_TOPIC``.
The decisions themselves are made by the pure :mod:`adapter.transaction.state`.

One worker owns partition p of HALF, END and OP together: HALF and END are read through the
consumer group ``CID_RMQ_SYS_TRANS`` with the range assignor, which gives partition p of both
topics to the same member; OP p is read back when p is assigned. Beyond RocketMQ:

- exactly once: the real message, its OP record and the consumed HALF, END and OP positions
  are committed in one Kafka transaction, so a decision is applied once across crashes, and a
  duplicate decision changes nothing;
- on time: each pending message has its own due time; the worker sleeps until the earliest
  one instead of scanning every 30 s;
- durable checks: each check is an OP record committed with the check request, so a successor
  knows how many checks were sent and when the last one was;
- scale-out: workers share the partitions through the group; each has its own transactional id;
- corrupt HALF or END records are parked in ``RMQ_SYS_POISON_TOPIC`` with the reason.

Known gaps: a message committed to a real topic that no longer exists (or whose name is not a
valid topic) is parked in ``TRANS_CHECK_MAX_TIME_TOPIC`` with the reason instead of being
retried; ``rmq-adapter transactions resume`` re-drives it. Pending half messages are held in
memory as their encoded bytes (about the body size each).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaRecord
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from adapter import codec, naming
from adapter import properties as prop
from adapter.config import CoordinatorConfig
from adapter.exceptions import AdapterError, CodecError
from adapter.fetch import fetch
from adapter.read_back import read_to_end
from adapter.records import EndTransaction, HalfMessage, OpKind, OpRecord
from adapter.topics import ensure_single_queue_topic
from adapter.transaction.envelope import check_request, committed_delivery
from adapter.transaction.state import (
    Action,
    Check,
    Commit,
    Discard,
    Duplicate,
    PartitionState,
    Pending,
    Refuse,
    Rollback,
    half_info,
)
from adapter.transactional_worker import (
    Fenced,
    TransactionalWorker,
    now_ms,
    parked_headers,
    produce,
)

log = logging.getLogger("adapter.transactions")

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
DISCARDED = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)

_TOPIC_CACHE_S = 30.0


class CoordinatorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.pending = Gauge(
            "rmq_transactions_pending", "Half messages waiting for a decision.", registry=registry
        )
        self.oldest_age = Gauge(
            "rmq_transactions_oldest_pending_age_seconds",
            "Age of the oldest pending half message (0 when none).",
            registry=registry,
        )

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, registry=registry)

        self.commits = counter("rmq_transactions_commits", "Half messages committed.")
        self.rollbacks = counter("rmq_transactions_rollbacks", "Half messages rolled back.")
        self.checks = counter("rmq_transactions_checks", "Checks sent to producer groups.")
        self.discards = counter(
            "rmq_transactions_discards", "Half messages parked in TRANS_CHECK_MAX_TIME_TOPIC."
        )
        self.refused = counter("rmq_transactions_refused", "Decisions refused (mismatch, late).")
        self.duplicates = counter(
            "rmq_transactions_duplicates", "Decisions for already resolved half messages."
        )
        self.parked = counter("rmq_transactions_parked", "Corrupt records parked as poison.")
        self.commit_latency = Histogram(
            "rmq_transactions_commit_latency_seconds",
            "From the half message's birth to its commit being applied.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=registry,
        )


@dataclass(slots=True)
class _Turn:
    """One transaction's work: effects to produce, and which partitions changed."""

    actions: list[tuple[int, Action[bytes]]] = field(default_factory=list)
    poison: list[tuple[KafkaRecord, str]] = field(default_factory=list)
    touched: set[int] = field(default_factory=set)


class TransactionCoordinator(TransactionalWorker):
    """``run()`` until ``stop()``; or drive it with ``start()``, ``run_once()``, ``close()``."""

    name = "transaction coordinator"
    log = log

    def __init__(
        self, config: CoordinatorConfig, registry: CollectorRegistry | None = None
    ) -> None:
        super().__init__(config.worker_id, config.kafka_transaction_timeout_ms, config.producer)
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.metrics = CoordinatorMetrics(self.registry)
        self._states: dict[int, PartitionState[bytes]] = {}
        self._admin: AdminClient | None = None
        self._check_topics: set[str] = set()
        self._topics: dict[str, tuple[float, int]] = {}
        self._op_written: dict[int, int] = {}
        self._dirty: set[int] = set()
        self._in_transaction = False
        self._end_read_ms: dict[int, int] = {}
        """Per partition, the time the last END record read was written."""
        self._to_restore: set[int] = set()
        """Owned partitions whose state is to be rebuilt from Kafka."""
        self._next_position_commit = 0.0
        self._next_gauges = 0.0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._producer = self._new_producer()
        self._admin = AdminClient(self.config.kafka.librdkafka({}))
        consumer = Consumer(self.config.consumer(naming.TRANS_COORDINATOR_GROUP), logger=log)
        consumer.subscribe(
            [HALF, END], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._consumer = consumer
        log.info("transaction coordinator %s started", self.config.worker_id)

    # -- one turn ---------------------------------------------------------------------------

    def run_once(self) -> int:
        """Read, decide, and apply in one Kafka transaction; return how many actions ran."""
        _, consumer = self._clients()
        if self._to_restore:
            self._restore_pending()
        wait_ms = self.config.max_wait_ms
        due = [d for d in (s.next_due_ms() for s in self._states.values()) if d is not None]
        if due:
            wait_ms = max(0, min(wait_ms, min(due) - now_ms()))
        records = fetch(consumer, self.config.max_batch, wait_ms / 1000)
        turn = _Turn()
        try:
            self._decide(records, turn)
            self._dirty |= turn.touched
            if (
                turn.actions
                or turn.poison
                or (self._dirty and time.monotonic() >= self._next_position_commit)
            ):
                self._apply(turn)
        except KafkaException as exc:
            self._recover(exc.args[0])
        except Fenced:
            raise
        except BaseException:
            # Whatever was decided in memory for this turn must not outlive it.
            self._recover(None)
            raise
        if time.monotonic() >= self._next_gauges:
            self._next_gauges = time.monotonic() + 1.0
            self.update_gauges()
        return len(turn.actions)

    def _decide(self, records: list[KafkaRecord], turn: _Turn) -> None:
        _, consumer = self._clients()
        for record in records:
            self._accept(record, turn)
        now = now_ms()
        room = self.config.max_batch
        for partition, state in self._states.items():
            read_to = self._decisions_read_to_ms(consumer, partition)
            for action in state.due(now, max(0, room - len(turn.actions)), read_to):
                turn.actions.append((partition, action))
                turn.touched.add(partition)
            half_end = self._half_end(partition)
            expired = [] if half_end is None else state.expire_waiting(now, half_end)
            if expired:
                turn.actions.extend((partition, a) for a in expired)
                turn.touched.add(partition)

    def _accept(self, record: KafkaRecord, turn: _Turn) -> None:
        error = record.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            log.warning("consumer error: %s", error)
            return
        partition = record.partition() or 0
        state = self._states.get(partition)
        if state is None:
            return
        offset = record.offset() or 0
        turn.touched.add(partition)
        now = now_ms()
        if record.topic() == HALF:
            try:
                info = half_info(
                    codec.decode_as(HalfMessage, record.value() or b"", canonical=False)
                )
            except AdapterError as exc:
                turn.poison.append(
                    (record, f"{'corrupt' if isinstance(exc, CodecError) else 'invalid'}: {exc}")
                )
                actions = state.skip_half(offset)
            else:
                actions = state.half(offset, info, record.value() or b"", now)
        else:
            try:
                end = codec.decode_as(EndTransaction, record.value() or b"", canonical=False)
                if end.half_partition != partition:
                    raise AdapterError(
                        f"decision for half partition {end.half_partition} "
                        f"written to END partition {partition}"
                    )
            except CodecError as exc:
                turn.poison.append((record, f"corrupt: {exc}"))
                state.skip_end(offset)
                return
            except AdapterError as exc:
                turn.poison.append((record, f"misrouted: {exc}"))
                state.skip_end(offset)
                return
            actions = state.end(offset, end, now)
            self._end_read_ms[partition] = max(
                self._end_read_ms.get(partition, 0), record.timestamp()[1]
            )
        turn.actions.extend((partition, a) for a in actions)

    # -- applying a turn --------------------------------------------------------------------

    def _apply(self, turn: _Turn) -> None:
        producer, consumer = self._clients()
        self._op_written = {}
        dirty, self._dirty = self._dirty, set()
        self._next_position_commit = time.monotonic() + 1.0
        producer.begin_transaction()
        self._in_transaction = True
        for record, reason in turn.poison:
            self._park(producer, record, reason)
        for partition, action in turn.actions:
            self._effect(producer, partition, action)
        offsets: list[TopicPartition] = []
        for partition in sorted(dirty):
            state = self._states.get(partition)
            if state is None:
                continue
            half, end, op = state.positions()
            offsets += [
                TopicPartition(HALF, partition, half),
                TopicPartition(END, partition, end),
                TopicPartition(OP, partition, op),
            ]
        timeout = self._timeout_s()
        self._retrying(
            lambda: producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), timeout
            )
        )
        self._retrying(lambda: producer.commit_transaction(timeout))
        self._in_transaction = False
        for partition, next_op in self._op_written.items():
            state = self._states.get(partition)
            if state is not None:
                state.op_written(next_op)
        self._count(turn)

    def _effect(self, producer: Producer, partition: int, action: Action[bytes]) -> None:
        now = now_ms()
        if isinstance(action, Commit):
            half = codec.decode_as(HalfMessage, action.pending.payload, canonical=False)
            delivery = committed_delivery(half, check_times=action.pending.check_times)
            topic = naming.kafka_topic(delivery.topic)
            count = self._partition_count(topic)
            if not count:
                why = f"real topic {delivery.topic!r} is missing"
                self._discard(producer, partition, action.pending, why)
                return
            kwargs: dict[str, Any] = {"headers": delivery.headers}
            if 0 <= delivery.queue_id < count:
                kwargs["partition"] = delivery.queue_id
            produce(producer, topic, delivery.value, **kwargs)
            self._op(producer, partition, action.pending, OpKind.COMMIT, now)
        elif isinstance(action, Rollback):
            self._op(producer, partition, action.pending, OpKind.ROLLBACK, now)
        elif isinstance(action, Check):
            pending = action.pending
            half = codec.decode_as(HalfMessage, pending.payload, canonical=False)
            request = check_request(
                half,
                half_partition=partition,
                half_offset=pending.offset,
                check_times=pending.check_times,
                now_ms=now,
            )
            topic = self._check_topic(half.producer_group)
            produce(producer, topic, codec.encode(request), key=half.transaction_id.encode())
            self._op(producer, partition, pending, OpKind.CHECK, now)
        elif isinstance(action, Discard):
            self._discard(producer, partition, action.pending, action.reason)
        # Refuse and Duplicate change nothing in Kafka; they are logged and counted.

    def _discard(
        self, producer: Producer, partition: int, pending: Pending[bytes], why: str
    ) -> None:
        headers = [
            ("reason", why.encode()),
            (prop.UNIQ_KEY, pending.info.transaction_id.encode()),
            (prop.PRODUCER_GROUP, pending.info.producer_group.encode()),
            (prop.TRANSACTION_CHECK_TIMES, str(pending.check_times).encode()),
            ("source.partition", str(partition).encode()),
            ("source.offset", str(pending.offset).encode()),
        ]
        key = pending.info.transaction_id.encode()
        produce(producer, DISCARDED, pending.payload, key=key, headers=headers)
        self._op(producer, partition, pending, OpKind.DISCARD, now_ms(), why)
        log.error(
            "discarded transaction %s of group %s (half %d@%d): %s",
            pending.info.transaction_id,
            pending.info.producer_group,
            partition,
            pending.offset,
            why,
        )

    def _op(
        self,
        producer: Producer,
        partition: int,
        pending: Pending[bytes],
        kind: OpKind,
        now: int,
        reason: str | None = None,
    ) -> None:
        record = OpRecord(
            transaction_id=pending.info.transaction_id,
            half_partition=partition,
            half_offset=pending.offset,
            kind=kind,
            check_times=pending.check_times,
            producer_group=pending.info.producer_group,
            reason=reason,
            timestamp=now,
        )

        def written(error: KafkaError | None, msg: KafkaRecord) -> None:
            if error is None:
                next_op = (msg.offset() or 0) + 1
                self._op_written[partition] = max(self._op_written.get(partition, 0), next_op)

        produce(producer, OP, codec.encode(record), partition=partition, on_delivery=written)

    def _park(self, producer: Producer, record: KafkaRecord, reason: str) -> None:
        headers = parked_headers(
            reason, record.topic() or "", record.partition() or 0, record.offset() or 0
        )
        produce(producer, POISON, record.value() or b"", headers=headers)
        log.error(
            "parked %s %d@%d in %s: %s",
            record.topic(),
            record.partition(),
            record.offset(),
            naming.POISON_TOPIC,
            reason,
        )

    def _count(self, turn: _Turn) -> None:
        m = self.metrics
        now = now_ms()
        m.parked.inc(len(turn.poison))
        for partition, action in turn.actions:
            if isinstance(action, Commit):
                m.commits.inc()
                m.commit_latency.observe(max(0, now - action.pending.info.born_ms) / 1000)
            elif isinstance(action, Rollback):
                m.rollbacks.inc()
            elif isinstance(action, Check):
                m.checks.inc()
            elif isinstance(action, Discard):
                m.discards.inc()
            elif isinstance(action, Refuse):
                m.refused.inc()
                log.warning(
                    "refused decision END %d@%d: %s", partition, action.end_offset, action.reason
                )
            elif isinstance(action, Duplicate):
                m.duplicates.inc()
                log.info(
                    "duplicate decision for transaction %s (half %d@%d) ignored",
                    action.end.transaction_id,
                    partition,
                    action.end.half_offset,
                )

    def _recover(self, error: KafkaError | None) -> None:
        """Abort the failed transaction and read every owned partition again from the last
        commit: what was decided in memory for the aborted turn is forgotten with it."""
        self._fenced_if_fatal(error)
        log.warning("coordinator turn failed: %s", error.str() if error else "see above")
        if self._in_transaction:
            self._in_transaction = False
            self._abort()
        self._to_restore.update(self._states)
        self._states.clear()

    # -- helpers ----------------------------------------------------------------------------

    def _check_topic(self, group: str) -> str:
        topic = naming.kafka_topic(naming.check_topic(group))
        if topic not in self._check_topics:
            if self._admin is None:
                raise RuntimeError("the coordinator is not started")
            ensure_single_queue_topic(self._admin, topic, self._timeout_s())
            self._check_topics.add(topic)
        return topic

    def _partition_count(self, topic: str) -> int:
        """The real topic's partition count, 0 when it does not exist (cached for 30 s)."""
        cached = self._topics.get(topic)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        producer, _ = self._clients()
        metadata = producer.list_topics(timeout=10)  # all topics: never auto-creates one
        found = metadata.topics.get(topic)
        count = len(found.partitions) if found and found.error is None else 0
        self._topics[topic] = (time.monotonic() + (_TOPIC_CACHE_S if count else 1.0), count)
        return count

    def _decisions_read_to_ms(self, consumer: Consumer, partition: int) -> int | None:
        """None when END p is read to its end; else the time of the last decision read."""
        [position] = consumer.position([TopicPartition(END, partition)])
        _, high = consumer.get_watermark_offsets(TopicPartition(END, partition), cached=True)
        if high is None or high < 0 or position.offset < 0 or position.offset >= high:
            return None
        return self._end_read_ms.get(partition, 0)

    def _half_end(self, partition: int) -> int | None:
        _, consumer = self._clients()
        _, high = consumer.get_watermark_offsets(TopicPartition(HALF, partition), cached=True)
        return int(high) if high is not None and high >= 0 else None

    # -- group membership and recovery ------------------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Newly owned partitions are restored at the start of the next turn (records read
        before then are ignored, and read again after the seek to the committed positions)."""
        self._to_restore.update(tp.partition for tp in partitions if tp.topic == HALF)

    def _restore_pending(self) -> None:
        """Restore the partitions waiting for it; one that fails is tried again next turn."""
        _, consumer = self._clients()
        self._restore(consumer, sorted(self._to_restore))
        self._to_restore.clear()

    def _restore(self, consumer: Consumer, partitions: list[int]) -> None:
        """Build the state of ``partitions`` from the committed positions: OP is read back to
        its end, and HALF and END are consumed again from their positions."""
        wanted = [TopicPartition(t, p) for p in partitions for t in (HALF, END, OP)]
        committed = {
            (tp.topic, tp.partition): tp.offset
            for tp in consumer.committed(wanted, timeout=self._timeout_s() + 30)
        }
        states: dict[int, PartitionState[bytes]] = {
            p: PartitionState(
                self.config.policy,
                half_start=max(committed[(HALF, p)], 0),
                end_start=max(committed[(END, p)], 0),
                op_start=max(committed[(OP, p)], 0),
            )
            for p in partitions
        }
        self._replay_op({p: max(committed[(OP, p)], 0) for p in partitions}, states)
        for p, state in states.items():
            state.recovery_done()
            for topic in (HALF, END):
                offset = committed[(topic, p)]
                consumer.seek(TopicPartition(topic, p, offset if offset >= 0 else 0))
            self._states[p] = state
        log.info("coordinating partitions %s", partitions)

    def _replay_op(self, starts: dict[int, int], states: dict[int, PartitionState[bytes]]) -> None:
        replayed = 0
        timeout = self._timeout_s() + 60
        for record in read_to_end(self.config.kafka.librdkafka({}), OP, starts, timeout):
            partition, offset = record.partition() or 0, record.offset() or 0
            try:
                op = codec.decode_as(OpRecord, record.value() or b"", canonical=False)
            except CodecError as exc:
                log.error("OP %d@%d does not decode (%s); skipped", partition, offset, exc)
                continue
            states[partition].recover_op(op, offset)
            replayed += 1
        log.info("replayed %d OP records of partitions %s", replayed, sorted(starts))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions, "revoked")

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(partitions, "lost")

    def _forget(self, partitions: list[TopicPartition], how: str) -> None:
        gone = sorted({tp.partition for tp in partitions if tp.topic == HALF})
        for p in gone:
            self._states.pop(p, None)
            self._to_restore.discard(p)
            self._end_read_ms.pop(p, None)
        if gone:
            log.info("%s partitions %s", how, gone)

    # -- observability ----------------------------------------------------------------------

    def update_gauges(self) -> None:
        pending = sum(s.pending_count for s in self._states.values())
        self.metrics.pending.set(pending)
        oldest = [b for b in (s.oldest_born_ms() for s in self._states.values()) if b is not None]
        self.metrics.oldest_age.set(max(0, now_ms() - min(oldest)) / 1000 if oldest else 0)

    def pending(self) -> list[tuple[int, Pending[bytes]]]:
        return [(p, pending) for p, s in sorted(self._states.items()) for pending in s.pending()]
