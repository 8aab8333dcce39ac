"""The transaction coordinator: RocketMQ's end-transaction and check-back as a Kafka worker.

Reproduces the broker side of transactional messages (``SendMessageProcessor`` storing the half
message, ``EndTransactionProcessor``, ``TransactionalMessageCheckService``): half
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
- cheap under load: a decision the producer already made visible (the fast path), a rollback
  and a duplicate only need their OP record; they wait up to ``record_linger_ms`` (100 ms) to
  share one Kafka transaction with later ones, instead of one transaction per fetch. Nothing
  is committed for them meanwhile, so a crash only means a successor records them again;
- on time: each pending message has its own due time; the worker sleeps until the earliest
  one instead of scanning every 30 s;
- durable checks: each check is an OP record committed with the check request, so a successor
  knows how many checks were sent and when the last one was;
- no check races a decision in flight: a check waits behind a read mark written to END and
  read back, read_committed (:mod:`adapter.transaction.read_mark`);
- scale-out: workers share the partitions through the group; each has its own transactional id;
- nothing unreadable is dropped silently: a corrupt or misrouted HALF or END record, an OP
  record the takeover replay cannot read, and a decision the state refuses (no such half
  message, wrong transaction id or group, too late) are parked in ``RMQ_SYS_POISON_TOPIC``
  with the reason and counted;
- self-healing: a failed turn is aborted and the owned partitions are read again from the
  last commit (with a new producer if the old one is stuck); a record the consumer delivers
  again is skipped with a warning; the OP replay of a takeover reads to OP's end as it was,
  past a transaction still open there (``reading.read_to_end``).

Known gaps: a message committed to a real topic that no longer exists (or whose name is not a
valid topic) is parked in ``TRANS_CHECK_MAX_TIME_TOPIC`` with the reason instead of being
retried; ``rmq-adapter transactions resume`` re-drives it. An unreadable OP record is parked
when a replay meets it, so one that lies behind a long-pending message is parked again at each
takeover (its headers name its source offset). Pending half messages are held in
memory as their encoded bytes (about the body size each).
"""

from __future__ import annotations

import logging
from typing import TypeVar

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord
from confluent_kafka.admin import AdminClient

from adapter import naming
from adapter.exceptions import AdapterError, UnusableRecordError
from adapter.kafka import clients, metadata, reading, schemas
from adapter.kafka.reading import caught_up, fetch, read_to_end
from adapter.kafka.worker import ExactlyOnceWorker
from adapter.transaction.config import CoordinatorConfig
from adapter.transaction.direct_search import settle_searches
from adapter.transaction.effects import Effects
from adapter.transaction.envelope import DELIVERED_HEADER, MARK_HEADER
from adapter.transaction.metrics import CoordinatorMetrics
from adapter.transaction.read_mark import MARK_GIVE_UP_MS
from adapter.transaction.state import PartitionState, Pending, half_info
from adapter.transaction.turn import Turn
from adapter.wire.records import EndTransaction, HalfMessage, OpRecord

log = logging.getLogger(__name__)

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
HALF_END_TIMEOUT_S = 2.0
Routed = TypeVar("Routed", EndTransaction, OpRecord)


class TransactionCoordinator(ExactlyOnceWorker[CoordinatorConfig]):
    """``run()`` until ``stop()``; or drive it with ``start()``, ``run_once()``, ``close()``."""

    name = "transaction coordinator"
    log = log
    group = naming.TRANS_COORDINATOR_GROUP

    def setup(self) -> None:
        self.metrics = CoordinatorMetrics(
            self.registry, self.pending_count, self.oldest_age_s, self.stale
        )
        self._states: dict[int, PartitionState[bytes]] = {}
        self._known: dict[int, tuple[int, int | None]] = {}
        """Per owned partition, (pending count, oldest born time) as of the last good turn: the
        gauges' source, kept while a partition is being rebuilt."""
        self._admin: AdminClient | None = None
        self.effects = Effects(self.tx, self.topics, lambda: self._admin, self.clock)
        self._dirty: set[int] = set()
        self._to_restore: set[int] = set()
        """Owned partitions whose state is to be rebuilt from Kafka."""
        self._next_position_commit = 0.0
        self._lookup = schemas.lookup_for(self.config.kafka)
        self._replay_poison: list[tuple[KafkaRecord, str]] = []
        """Unreadable OP records met by the last replay, parked in the next turn."""
        self._turn = Turn()
        """The open turn: decided, not applied yet (see ``record_linger_ms``)."""

    # -- lifecycle --------------------------------------------------------------------------

    def reads(self) -> list[str]:
        return [HALF, END]

    def prepare(self) -> None:
        schemas.install(self.config.kafka).wait(schemas.START_WAIT_S)
        self._admin = clients.admin(self.config.kafka.librdkafka({}))
        conf = self.config.kafka.librdkafka({})
        metadata.require_visible(conf, [HALF, END, OP], "READ", self.tx.timeout_s)
        log.info("transaction coordinator %s starting", self.config.worker_id)

    # -- one turn ---------------------------------------------------------------------------

    def run_once(self) -> int:
        """Read, decide, and apply in one Kafka transaction; return how many actions ran."""
        consumer = self.consumer()
        turn = self._turn
        linger_s = self.config.record_linger_ms / 1000
        applied = 0
        try:
            if self._to_restore:
                self._restore_pending()
            turn.poison += self._replay_poison
            turn.touched.update(record.partition() or 0 for record, _ in self._replay_poison)
            self._replay_poison = []
            wait_ms = self.config.max_wait_ms
            wake = [w for w in (s.wake_ms() for s in self._states.values()) if w is not None]
            if wake:
                wait_ms = max(0, min(wait_ms, min(wake) - self.clock.now_ms()))
            if turn.opened_s is not None:
                left_s = turn.opened_s + linger_s - self.clock.monotonic()
                wait_ms = max(0, min(wait_ms, int(left_s * 1000)))
            records = fetch(consumer, self.config.max_batch, wait_ms / 1000)
            since = len(turn.actions)
            self._decide(records, turn)
            turn.note(since, self.clock.monotonic())
            self._dirty |= turn.touched
            now_s = self.clock.monotonic()
            if turn.due(now_s, linger_s, self.config.max_batch) or (
                self._dirty and now_s >= self._next_position_commit
            ):
                self._apply(turn)
                applied = len(turn.actions)
                self._turn = Turn()
        except BaseException as exc:
            # Whatever was decided in memory for this turn must not outlive it.
            self._recover(exc)
            raise
        self._remember_gauges()
        return applied

    def idle(self) -> bool:
        if not self.assigned_once or self._to_restore or self._dirty or self._turn.actions:
            return False
        now = self.clock.now_ms()
        if any(
            d is not None and d <= now for d in (s.next_due_ms() for s in self._states.values())
        ):
            return False
        owned = [TopicPartition(t, p) for p in sorted(self._states) for t in (HALF, END)]
        return caught_up(self.consumer(), owned, timeout_s=10)

    def _decide(self, records: list[KafkaRecord], turn: Turn) -> None:
        for record in records:
            self._accept(record, turn)
        self.rereads.report()
        now = self.clock.now_ms()
        room = self.config.max_batch
        for partition, state in self._states.items():
            self._ask_for_mark(partition, state, turn, now)
            read_to = state.mark.read_to_ms
            for action in state.due(now, max(0, room - len(turn.actions)), read_to):
                turn.actions.append((partition, action))
                turn.touched.add(partition)
            if state.waiting_overdue(now):
                half_end = self._half_end(partition)
                expired = [] if half_end is None else state.expire_waiting(now, half_end)
                if expired:
                    turn.actions.extend((partition, a) for a in expired)
                    turn.touched.add(partition)

    def _ask_for_mark(
        self, partition: int, state: PartitionState[bytes], turn: Turn, now: int
    ) -> None:
        """Write a read mark to END when a check is due and none was read back past its due
        time; again each few seconds while none comes back (logged and counted); and fail
        the turn when none came back for a minute: the consumer is not fetching, and the
        failed turn reads the partitions again (replacing the consumer if it goes on)."""
        mark = state.mark
        reasks = mark.reasks
        if mark.wanted(state.next_due_ms(), now):
            turn.marks.append((partition, now))
        if mark.reasks > reasks:
            self.metrics.mark_reasks.inc()
            log.warning(
                "no read mark came back from END partition %d for %.1f s (a transaction held "
                "open on it, or a consumer that stopped fetching); checks there wait; asking again",
                partition,
                mark.waiting_ms(now) / 1000,
            )
        if mark.waiting_ms(now) >= MARK_GIVE_UP_MS:
            raise AdapterError(
                f"no read mark came back from END partition {partition} within "
                f"{MARK_GIVE_UP_MS / 1000:g} s; reading the owned partitions again"
            )

    def _accept(self, record: KafkaRecord, turn: Turn) -> None:
        if not self.usable(record):
            return
        partition = record.partition() or 0
        state = self._states.get(partition)
        if state is None:
            return
        offset = record.offset() or 0
        if state.read_already(offset, end=record.topic() != HALF):
            self.rereads.note(
                f"{naming.decode(record.topic() or '')} partition {partition}", offset
            )
            return
        turn.touched.add(partition)
        if record.topic() == HALF:
            self._accept_half(record, state, turn)
        elif _has_header(record, MARK_HEADER):
            state.skip_end(offset)
            state.mark.read(record.timestamp()[1])
        else:
            self._accept_end(record, state, turn)

    def _accept_half(self, record: KafkaRecord, state: PartitionState[bytes], turn: Turn) -> None:
        partition, offset = record.partition() or 0, record.offset() or 0
        try:
            info = half_info(reading.decode(HalfMessage, record, lookup=self._lookup))
        except AdapterError as exc:
            turn.poison.append((record, exc.reason))
            actions = state.skip_half(offset)
        else:
            actions = state.half(offset, info, record.value() or b"", self.clock.now_ms())
            first = state.repeat_of(offset)
            if first is not None:
                log.info(
                    "half message %d@%d repeats transaction %s of %d@%d (one send written "
                    "twice); it is decided, checked and delivered as that one",
                    *(partition, offset, info.transaction_id, partition, first),
                )
        turn.actions.extend((partition, a) for a in actions)

    def _accept_end(self, record: KafkaRecord, state: PartitionState[bytes], turn: Turn) -> None:
        partition, offset = record.partition() or 0, record.offset() or 0
        try:
            end = self._decode_routed(EndTransaction, record, "decision")
        except AdapterError as exc:
            turn.poison.append((record, exc.reason))
            state.skip_end(offset)
            return
        delivered = _has_header(record, DELIVERED_HEADER)
        actions = state.end(offset, end, self.clock.now_ms(), delivered=delivered)
        turn.actions.extend((partition, a) for a in actions)

    # -- applying a turn --------------------------------------------------------------------

    def _apply(self, turn: Turn) -> None:
        dirty, self._dirty = self._dirty, set()
        self._next_position_commit = self.clock.monotonic() + 1.0
        conf, search_s = self.config.kafka.librdkafka({}), self.tx.timeout_s + 60
        settle_searches(turn.actions, conf, search_s, self.clock)  # before the transaction
        self.effects.begin()
        for record, reason in turn.poison:
            self.effects.park(record, reason)
        for partition, at_ms in turn.marks:
            self.effects.mark(partition, at_ms)
        for partition, action in turn.actions:
            self.effects.apply(partition, action)
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
        self.tx.commit(offsets, self.consumer())
        for partition, next_op in self.effects.op_written.items():
            state = self._states.get(partition)
            if state is not None:
                state.op_written(next_op)
        self.metrics.count(turn.actions, len(turn.poison), self.clock.now_ms())

    def _recover(self, cause: BaseException) -> None:
        """Abort the failed turn's transaction and read every owned partition again from the
        last commit: what was decided in memory for the aborted turn is forgotten with it."""
        self.tx.fail(cause)
        self._turn = Turn()
        self._replay_poison.clear()
        self._to_restore.update(self._states)
        self._states.clear()  # with them their read marks: a rebuilt state asks anew
        self._dirty.clear()

    # -- helpers ----------------------------------------------------------------------------

    def _decode_routed(self, kind: type[Routed], record: KafkaRecord, what: str) -> Routed:
        """``record`` decoded as ``kind``; refused as misrouted unless the half partition it
        names is the partition it lies on (END and OP are co-partitioned with HALF)."""
        value = reading.decode(kind, record, lookup=self._lookup)
        partition = record.partition() or 0
        if value.half_partition != partition:
            raise UnusableRecordError(
                "misrouted",
                f"{what} of half partition {value.half_partition} written to "
                f"{naming.decode(record.topic() or '')} partition {partition}",
            )
        return value

    def _half_end(self, partition: int) -> int | None:
        """HALF's end now, asked of its leader (a cached end lags behind a leader change: an
        END would be refused for a half message the new leader has); None when unknown."""
        try:
            _, high = self.consumer().get_watermark_offsets(
                TopicPartition(HALF, partition), timeout=HALF_END_TIMEOUT_S, cached=False
            )
        except KafkaException as exc:
            log.info("HALF partition %d's end is unknown now (%s); ENDs wait", partition, exc)
            return None
        return int(high) if high is not None and high >= 0 else None

    # -- group membership and recovery ------------------------------------------------------

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        """Newly owned partitions are restored at the start of the next turn (records read
        before then are ignored, and read again after the seek to the committed positions).
        Gauges kept for partitions this worker no longer owns are dropped."""
        owned = {tp.partition for tp in partitions if tp.topic == HALF}
        self._to_restore.update(owned)
        for p in set(self._known) - owned - set(self._states) - self._to_restore:
            del self._known[p]

    def _restore_pending(self) -> None:
        """Restore the partitions waiting for it that the consumer holds now; one that fails,
        or is not assigned yet, is tried again next turn."""
        held = {tp.partition for tp in self.consumer().assignment() if tp.topic == HALF}
        ready = sorted(self._to_restore & held)
        if ready:
            self._restore(ready)
            self._to_restore.difference_update(ready)
        if not self._to_restore:
            self.tx.settled()  # every partition was read back after the failed turn

    def _restore(self, partitions: list[int]) -> None:
        """Build the state of ``partitions`` from the committed positions: OP is read back to
        its end, and HALF and END are consumed again from their positions."""
        consumer = self.consumer()
        wanted = [TopicPartition(t, p) for p in partitions for t in (HALF, END, OP)]
        committed = {(tp.topic, tp.partition): tp.offset for tp in self.settled_positions(wanted)}
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
        conf = self.config.kafka.librdkafka({})
        consumer = self.consumer()
        half_ends = {
            p: consumer.get_watermark_offsets(TopicPartition(HALF, p), timeout=self.tx.timeout_s)[1]
            for p in starts
        }
        for record in read_to_end(conf, OP, starts, self.tx.timeout_s + 60, self.clock):
            partition, offset = record.partition() or 0, record.offset() or 0
            try:
                op = self._decode_routed(OpRecord, record, "OP record")
                if not 0 <= op.half_offset < half_ends[partition]:
                    raise UnusableRecordError(
                        "out of range",
                        f"OP record names half offset {op.half_offset}, outside HALF partition "
                        f"{partition} (end {half_ends[partition]})",
                    )
            except AdapterError as exc:
                self._replay_poison.append((record, exc.reason))
                states[partition].skip_op(offset)
                continue
            states[partition].recover_op(op, offset)
            replayed += 1
        log.info("replayed %d OP records of partitions %s", replayed, sorted(starts))

    def on_dropped(self, partitions: list[TopicPartition], how: str) -> None:
        gone = sorted({tp.partition for tp in partitions if tp.topic == HALF})
        # Their next owner decides them again from the last commit, and parks again what
        # it cannot read.
        self._turn.drop(gone)
        self._replay_poison = [
            (r, why) for r, why in self._replay_poison if r.partition() not in gone
        ]
        for p in gone:
            self._states.pop(p, None)
            self._to_restore.discard(p)
            if how == "revoked":  # another worker owns it now, and reports it
                self._known.pop(p, None)
        if gone:
            log.info("%s partitions %s", how, gone)

    # -- observability ----------------------------------------------------------------------

    def _remember_gauges(self) -> None:
        for p, state in self._states.items():
            self._known[p] = (state.pending_count, state.oldest_born_ms())

    def stale(self) -> bool:
        """Whether the gauges hold values of partitions not read back since Kafka went away
        (the last ones known, kept so that an alert on them does not go silent)."""
        return bool(set(self._known) - set(self._states))

    def ready(self) -> bool:
        """As every worker's, and the gauges are current."""
        return super().ready() and not self.stale()

    def pending_count(self) -> float:
        """Pending half messages of the owned partitions, as of the last good turn."""
        return float(sum(count for count, _ in list(self._known.values())))

    def oldest_age_s(self) -> float:
        """Age of the oldest pending half message now (0 when none)."""
        born = [b for _, b in list(self._known.values()) if b is not None]
        return max(0, self.clock.now_ms() - min(born)) / 1000 if born else 0.0

    def pending(self) -> list[tuple[int, Pending[bytes]]]:
        return [(p, pending) for p, s in sorted(self._states.items()) for pending in s.pending()]


def _has_header(record: KafkaRecord, name: str) -> bool:
    return any(header[0] == name for header in record.headers() or ())
