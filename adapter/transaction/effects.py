"""What the coordinator writes to Kafka for each decision, inside the turn's transaction.

Reproduces the broker's side effects in ``EndTransactionProcessor`` and
``TransactionalMessageCheckService``:

- COMMIT: the message restored to its real topic (``endMessageTransaction``) and an OP record
  (RocketMQ's op message with tag ``d``); only the OP record when the producer's own Kafka
  transaction delivered the message (the fast path);
- ROLLBACK: only the OP record;
- a check: a ``CheckRequest`` to the group's check topic and an OP record, so the check count
  survives a crash (RocketMQ keeps it in the re-written half message);
- a discard: the half message parked in ``TRANS_CHECK_MAX_TIME_TOPIC`` with the reason, and an
  OP record;
- a record that cannot be read, and a decision that is refused: parked in
  ``RMQ_SYS_POISON_TOPIC`` with the reason (RocketMQ logs a refused END and drops it);
- a read mark in END (no RocketMQ counterpart; see :mod:`adapter.transaction.coordinator`).

Known gaps: a commit whose real topic no longer exists is discarded (parked with the reason,
resumable) rather than retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import assert_never

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaRecord
from confluent_kafka.admin import AdminClient

from adapter import naming
from adapter import properties as prop
from adapter.clock import Clock
from adapter.exceptions import AdapterError
from adapter.kafka import reading
from adapter.kafka.metadata import PartitionCounts
from adapter.kafka.topics import ensure_single_queue_topic
from adapter.kafka.transactor import Transactor
from adapter.kafka.worker import parked_headers
from adapter.transaction.actions import (
    Action,
    Check,
    Commit,
    Discard,
    Duplicate,
    Refuse,
    Rollback,
)
from adapter.transaction.envelope import MARK_HEADER, check_request, committed_delivery
from adapter.transaction.half import Pending
from adapter.wire import codec
from adapter.wire.records import HalfMessage, OpKind, OpRecord

log = logging.getLogger(__name__)

END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
DISCARDED = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)


@dataclass(eq=False)
class Effects:
    """Produces the records of a turn's actions through the worker's :class:`Transactor`, and
    notes how far each OP partition was written (known once the transaction commits)."""

    tx: Transactor
    topics: PartitionCounts
    admin: Callable[[], AdminClient | None]
    clock: Clock
    op_written: dict[int, int] = field(default_factory=dict)
    """Per HALF partition, the OP offset after the last OP record of this turn."""
    _check_topics: set[str] = field(default_factory=set)

    def begin(self) -> None:
        self.op_written = {}
        self.tx.begin()

    def apply(self, partition: int, action: Action[bytes]) -> None:
        now = self.clock.now_ms()
        match action:
            case Commit() | Rollback():
                kind = self._end(partition, action, now)
                why = f"a copy of half offset {action.pending.offset} (one send stored twice)"
                for copy in action.copies:
                    self._op(partition, action.pending, kind, now, why, at=copy)
            case Check():
                self._check(partition, action.pending, now)
            case Discard():
                self.discard(partition, action.pending, action.reason)
            case Refuse():
                self.park_refused(partition, action)
            case Duplicate():
                pass  # it changes nothing in Kafka; it is logged and counted
            case _:
                assert_never(action)

    def _check(self, partition: int, pending: Pending[bytes], now: int) -> None:
        """A check request to the group's check topic, and its OP record."""
        half = codec.decode_as(HalfMessage, pending.payload, canonical=False)
        request = check_request(
            half,
            half_partition=partition,
            half_offset=pending.offset,
            check_times=pending.check_times,
            now_ms=now,
        )
        topic = self._check_topic(half.producer_group)
        self.tx.produce(topic, codec.encode(request), key=half.transaction_id.encode())
        self._op(partition, pending, OpKind.CHECK, now)

    def _end(self, partition: int, action: Commit[bytes] | Rollback[bytes], now: int) -> OpKind:
        """Apply a decision; the kind of OP record it wrote."""
        if isinstance(action, Rollback):
            self._op(partition, action.pending, OpKind.ROLLBACK, now)
            return OpKind.ROLLBACK
        if not action.delivered:
            half = codec.decode_as(HalfMessage, action.pending.payload, canonical=False)
            delivery = committed_delivery(half, check_times=action.pending.check_times)
            topic = naming.kafka_topic(delivery.topic)
            count = self.topics.count(topic)
            if not count:
                self.discard(partition, action.pending, f"real topic {delivery.topic!r} is missing")
                return OpKind.DISCARD
            partition_kw = (
                {"partition": delivery.queue_id} if 0 <= delivery.queue_id < count else {}
            )
            self.tx.produce(topic, delivery.value, headers=delivery.headers, **partition_kw)
        self._op(partition, action.pending, OpKind.COMMIT, now)
        return OpKind.COMMIT

    def discard(self, partition: int, pending: Pending[bytes], why: str) -> None:
        headers = [
            ("reason", why.encode()),
            (prop.UNIQ_KEY, pending.info.transaction_id.encode()),
            (prop.PRODUCER_GROUP, pending.info.producer_group.encode()),
            (prop.TRANSACTION_CHECK_TIMES, str(pending.check_times).encode()),
            ("source.partition", str(partition).encode()),
            ("source.offset", str(pending.offset).encode()),
        ]
        key = pending.info.transaction_id.encode()
        self.tx.produce(DISCARDED, pending.payload, key=key, headers=headers)
        self._op(partition, pending, OpKind.DISCARD, self.clock.now_ms(), why)
        log.error(
            "discarded transaction %s of group %s (half %d@%d): %s",
            pending.info.transaction_id,
            pending.info.producer_group,
            partition,
            pending.offset,
            why,
            extra={"msg_id": pending.info.transaction_id},
        )

    def mark(self, partition: int, now_ms: int) -> None:
        """A read mark in END ``partition``, stamped ``now_ms``: once it is read back,
        read_committed, every decision written before it has been read."""
        headers = [(MARK_HEADER, b"")]
        self.tx.produce(END, b"", partition=partition, headers=headers, timestamp=now_ms)

    def park(self, record: KafkaRecord, reason: str) -> None:
        headers = parked_headers(
            reason, record.topic() or "", record.partition() or 0, record.offset() or 0
        )
        self.tx.produce(POISON, record.value() or b"", headers=headers)
        msg_id = reading.header_text(record, prop.UNIQ_KEY) or "?"
        log.error(
            "parked %s %d@%d (message %s) in %s: %s",
            record.topic(),
            record.partition(),
            record.offset(),
            msg_id,
            naming.POISON_TOPIC,
            reason,
            extra={"msg_id": msg_id},
        )

    def park_refused(self, partition: int, refused: Refuse) -> None:
        """A decision that is not applied: parked (re-encoded) with the reason, never dropped."""
        value = b"" if refused.end is None else codec.encode(refused.end)
        reason = f"refused: {refused.reason}"
        headers = parked_headers(reason, END, partition, refused.end_offset)
        self.tx.produce(POISON, value, headers=headers)

    def _op(
        self,
        partition: int,
        pending: Pending[bytes],
        kind: OpKind,
        now: int,
        reason: str | None = None,
        *,
        at: int | None = None,
    ) -> None:
        """The OP record of ``pending`` (of its copy at offset ``at``, if given)."""
        record = OpRecord(
            transaction_id=pending.info.transaction_id,
            half_partition=partition,
            half_offset=pending.offset if at is None else at,
            kind=kind,
            check_times=pending.check_times,
            producer_group=pending.info.producer_group,
            reason=reason,
            timestamp=now,
        )

        def written(error: KafkaError | None, msg: KafkaRecord) -> None:
            if error is None:
                next_op = (msg.offset() or 0) + 1
                self.op_written[partition] = max(self.op_written.get(partition, 0), next_op)

        self.tx.produce(OP, codec.encode(record), partition=partition, on_delivery=written)

    def _check_topic(self, group: str) -> str:
        topic = naming.kafka_topic(naming.check_topic(group))
        if topic not in self._check_topics:
            admin = self.admin()
            if admin is None:
                raise AdapterError("the coordinator is not started")
            ensure_single_queue_topic(admin, topic, self.tx.timeout_s)
            self._check_topics.add(topic)
        return topic
