"""The schedule forwarder: RocketMQ's ``ScheduleMessageService`` as a Kafka worker, exactly once.

Reproduces RocketMQ's ``ScheduleMessageService`` (its ``DeliverDelayedMessageTimerTask`` and
``correctDeliverTimestamp``): each level of
``SCHEDULE_TOPIC_XXXX`` (partition = level - 1) is read in store order; a record is due at its
LogAppendTime + the level's delay (with the clock-jump correction); due records are restored
to their real topic and queue. Beyond RocketMQ:

- exactly once: the deliveries of a batch and the consumed positions are committed in one Kafka
  transaction (RocketMQ persists progress every 10 s and replays up to 10 s after a crash), and
  a record the consumer delivers again (its position went back) is skipped;
- on time: the worker waits exactly until the earliest head falls due, instead of re-scanning
  every 100 ms; the records behind a waiting head are fetched meanwhile, so they are in memory
  when they fall due; a level is paused only once it holds ``hold_bytes`` (4 MiB) of waiting
  records, until its head is due (:meth:`HeadOfLine.should_pause`); a batch's transaction
  begins ``prepare_ahead_ms`` (20) before its records fall due and sends its consumed
  positions then, and produces them and commits once all are due by the worker's clock
  (:attr:`Batch.not_before_ms`), so only the produce and the commit lie past the due time;
- scale-out: workers share the level partitions through the consumer group
  ``CID_RMQ_SYS_SCHEDULE``; each has its own transactional id, and a zombie is fenced;
- a real topic that refuses a delivery is retried with back-off while the other levels go on;
  a record whose real topic does not exist is set aside and retried without holding its level
  (:mod:`adapter.schedule.aside`); a record that can never be delivered (corrupt or with
  foreign headers, :mod:`adapter.schedule.intake`; addressed where no application may deliver
  through it, :mod:`adapter.schedule.destinations`; too large; or its topic missing past
  ``missing_topic_grace_ms``) is parked in ``RMQ_SYS_POISON_TOPIC`` with the reason, in the
  same transaction, instead of
  blocking its level forever or being dropped (:func:`plan_batch`,
  :mod:`adapter.schedule.refusals`);
- RocketMQ 5's timer messages: a timer record (headers ``TIMER_DELIVER_MS``, ``rmq.hop_due``)
  is due at the end of its hop; it then hops on or is delivered in the same kind of
  transaction (:mod:`adapter.schedule.timer`), and a delivery commits only if no recall came
  first in ``RMQ_SYS_TIMER_RECALL`` (:mod:`adapter.schedule.recall`).

Known gaps: a level's records are held in memory from fetch until due (up to ``hold_bytes``
each, plus librdkafka's prefetch queue). A record whose ``REAL_QID`` is not a partition of its
real topic goes to any partition.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.exceptions import AdapterError
from adapter.hops import HopTable
from adapter.kafka import metadata, schemas
from adapter.kafka.reading import caught_up, fetch
from adapter.kafka.topics import check_schedule_partitions
from adapter.kafka.worker import ExactlyOnceWorker
from adapter.logs import RepeatLimiter
from adapter.schedule import intake, recall
from adapter.schedule.broker_clock import AheadWatch, require_broker_stamps
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.head_of_line import Entry, HeadOfLine
from adapter.schedule.held import message_id_of
from adapter.schedule.metrics import ForwarderMetrics
from adapter.schedule.plan import Batch, Held, Parked, Send, plan_batch
from adapter.schedule.prepared import NotDue, wait_until_due
from adapter.schedule.recall_log import RECALL_TOPIC as RECALLS
from adapter.schedule.recall_log import RecallView
from adapter.schedule.refusals import PERMANENT, Refusals
from adapter.schedule.transit import Transit

log = logging.getLogger(__name__)

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)


def _held(value: bytes) -> int:
    """Bytes a held record takes: its value and about as much again for the objects."""
    return len(value) + 200


class _Recalled(Exception):
    """A timer of the batch was recalled before its DELIVERED marker: the batch must not
    commit (the next turn drops that timer)."""


class ScheduleForwarder(ExactlyOnceWorker[ForwarderConfig]):
    """``run()`` until ``stop()``; or drive it with ``start()``, ``run_once()``, ``close()``."""

    name = "schedule forwarder"
    log = log
    group = naming.SCHEDULE_FORWARDER_GROUP

    def setup(self) -> None:
        self.metrics = ForwarderMetrics(self.registry)
        self._heads: HeadOfLine[Parked] = HeadOfLine()
        self._hops = HopTable.of(self.config.levels)
        self._recalls: RecallView | None = None
        self._assigned: set[int] = set()
        self._paused: set[int] = set()
        self.refusals = Refusals()
        self._lookup = schemas.lookup_for(self.config.kafka)
        self._next_backlog_update = 0.0
        self._ahead = AheadWatch(self.metrics.broker_clock_ahead, log, self.clock.monotonic)
        self._asides = RepeatLimiter(30.0, self.clock.monotonic)

    # -- lifecycle --------------------------------------------------------------------------

    def reads(self) -> list[str]:
        return [SCHEDULE]

    def prepare(self) -> None:
        metadata.require_visible(
            self.config.kafka.librdkafka({}), [SCHEDULE, RECALLS], "READ", 10.0
        )
        check_schedule_partitions(self.topics, self.config.levels)
        require_broker_stamps(self.config.kafka.librdkafka({}), 10.0, log)
        schemas.install(self.config.kafka).wait(schemas.START_WAIT_S)
        if self._recalls is None:
            self._recalls = RecallView(self.config.kafka.librdkafka({}), self.config.worker_id)
        log.info(
            "schedule forwarder %s starting: %d levels and %d fine hops",
            self.config.worker_id,
            self.config.levels.max_level,
            len(self._hops.fine_ms),
        )
        if self.config.grants is not None:
            log.info(
                "signed records only, each to its signer's topics: %s",
                ", ".join(sorted(self.config.grants.applications)),
            )

    def close(self) -> None:
        recalls, self._recalls = self._recalls, None
        if recalls is not None:
            recalls.close()
        super().close()

    # -- one turn of the loop ---------------------------------------------------------------

    def run_once(self) -> int:
        """Fetch, forward what is due in one transaction; return how many records moved."""
        consumer = self.consumer()
        if self.tx.in_doubt:
            self._rewind()
        now, ahead = self.clock.now_ms(), self.config.prepare_ahead_ms
        wakeup = self._heads.next_wakeup_ms()
        wait_ms = self.config.max_wait_ms if wakeup is None else max(0, wakeup - ahead - now)
        wait_s = min(wait_ms, self.config.max_wait_ms) / 1000
        records = fetch(consumer, self.config.max_batch, wait_s)
        for record in records:
            self._accept(record)
        self.rereads.report()
        if self._recalls is not None:
            self._recalls.poll()
        moved = 0
        entries = self._heads.take_due(self.clock.now_ms() + ahead, self.config.max_batch)
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
        now, offset = self.clock.now_ms(), record.offset() or 0
        if self._heads.read_already(partition, offset):
            self.rereads.note(self._where(partition), offset)
            return
        value = record.value() or b""
        try:
            read = intake.read_record(
                partition,
                record.headers(),
                value,
                record.timestamp(),
                now,
                self._hops,
                self.config.grants,
            )
        except Exception as exc:  # noqa: BLE001 - no record may stop the forwarder: it is parked
            read = intake.unreadable(value, now, exc)
        if read.reason is not None:
            self.refusals.doom(partition, offset, read.reason)
        self._ahead.saw(self._hops.label(partition), read.ahead_ms)
        self._heads.push(Entry(partition, offset, read.due_ms, read.item, _held(value)))

    def _update_pauses(self) -> None:
        """Pause each level that holds enough waiting records; resume it once its head is due
        or it holds less."""
        consumer = self.consumer()
        now, high = self.clock.now_ms(), self.config.hold_bytes
        heads = self._heads
        pause = [
            p for p in self._assigned if p not in self._paused and heads.should_pause(p, now, high)
        ]
        resume = [p for p in self._paused if heads.may_resume(p, now, high)]
        if pause:
            consumer.pause([TopicPartition(SCHEDULE, p) for p in pause])
            self._paused.update(pause)
        if resume:
            consumer.resume([TopicPartition(SCHEDULE, p) for p in resume])
            self._paused.difference_update(resume)

    # -- forwarding -------------------------------------------------------------------------

    def _forward(self, entries: Sequence[Held]) -> int:
        # Topics asked by name: a broker creating topics on use creates them (autoCreateTopic).
        recalls = self._recalls.recalls if self._recalls is not None else {}
        try:
            batch = plan_batch(
                entries,
                now_ms=self.clock.now_ms() + self.config.prepare_ahead_ms,
                hops=self._hops,
                recalled=recalls.__contains__,
                doomed=self.refusals.doomed,  # kept until the record's parking commits
                partitions=lambda topic: self.topics.count(topic, create=True),
                lookup=self._lookup,
                missing_grace_ms=self.config.missing_topic_grace_ms,
                grants=self.config.grants,
            )
        except BaseException:
            self._heads.put_back(entries)  # nothing planned (a metadata request failed, ...)
            raise
        self._heads.put_back(batch.put_back)
        if not batch.sends:
            return 0
        transit = Transit(batch, frozenset(self.refusals.doomed))
        try:
            self._transact(transit)
        except _Recalled as exc:
            self._heads.put_back(batch.entries)  # nothing of the batch was committed
            self.tx.abort()
            log.info("%s; the batch goes again without it", exc)
            return 0
        except NotDue as exc:
            self._heads.put_back(batch.entries)  # nothing of the batch was produced
            self.tx.abort()
            log.debug("%s; the batch goes again", exc)
            return 0
        except (KafkaException, AdapterError) as exc:
            self._heads.put_back(batch.entries)  # nothing of the batch was committed
            if not self._recover(exc, transit):
                raise  # not about some records: the turn failed (Kafka unreachable, ...)
            return 0
        except BaseException as exc:
            self._heads.put_back(batch.entries)  # not committed: _transact ends with the commit
            self.tx.fail(exc)
            raise
        self._committed(batch)
        return len(batch.sends)

    def _transact(self, transit: Transit) -> None:
        """The batch and its consumed positions in one transaction: the positions first, then,
        once every record of the batch is due, the records and the commit."""
        batch = transit.batch
        self.tx.begin()
        positions = [TopicPartition(SCHEDULE, p, o) for p, o in batch.positions.items()]
        self.tx.send_offsets(positions, self.consumer())
        wait_until_due(self.clock, batch.not_before_ms, self.config.prepare_ahead_ms)
        for send in batch.sends:
            self._produce(transit, send)
        if transit.markers:
            self._check_recalls(transit)
        self.tx.commit()

    def _rewind(self) -> None:
        """A producer dropped in a transaction may have committed it (a commit that timed out
        can still reach the coordinator): what that batch took from memory cannot simply be put
        back. Once the old transaction is settled, drop what is held and read every level again
        from its committed position (:meth:`settled_positions`); records the old transaction
        did forward lie before that position now."""
        consumer = self.consumer()
        owned = [TopicPartition(SCHEDULE, p) for p in sorted(self._assigned)]
        for tp in self.settled_positions(owned):
            self._heads.drop(tp.partition)
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(TopicPartition(SCHEDULE, tp.partition, offset))
        self.tx.settled()
        log.info("read levels %s again from their committed positions", self._labels(owned))

    def _check_recalls(self, transit: Transit) -> None:
        """Before a batch delivers timers: no RECALL of one of them lies before its DELIVERED
        marker (:mod:`adapter.schedule.recall`); else :class:`_Recalled`."""
        producer, timeout = self.tx.producer, self.tx.timeout_s
        self.tx.call("flush", lambda: producer.flush(timeout), timeout)
        if not transit.markers_acknowledged():
            raise AdapterError("a DELIVERED marker was not acknowledged")
        view = self._recalls
        if view is None:
            raise AdapterError("the recall view is not open")
        view.read_past(max(transit.markers.values()), timeout)
        recalls = view.recalls
        lost = [m for m, o in transit.markers.items() if recall.recalled_before(recalls, m, o)]
        if lost:
            raise _Recalled(f"timers {lost} were recalled while being delivered")

    def _produce(self, transit: Transit, send: Send) -> None:
        entry = send.entry
        report = transit.report_for(send)
        kwargs: dict[str, Any] = {"on_delivery": report, **send.produce_kwargs()}
        try:
            self.tx.produce(send.topic, send.value, **kwargs)
        except KafkaException as exc:
            if exc.args[0].code() in PERMANENT:
                self.refusals.doom(entry.partition, entry.offset, f"refused: {exc.args[0].str()}")
            raise

    def _recover(self, exc: BaseException, transit: Transit) -> bool:
        """Abort the failed transaction; True when some of its records were refused (those
        levels then wait and retry, a record no retry cures is parked next time)."""
        self.tx.fail(exc)
        refused = self.refusals.sort(transit.failures())
        for partition in refused:
            self._refuse(partition, str(exc))
        return bool(refused) or bool(set(self.refusals.doomed) - transit.doomed_before)

    def _refuse(self, partition: int, why: str) -> None:
        attempt, wait = self.refusals.retry(partition)
        self._heads.block(partition, self.clock.now_ms() + int(wait * 1000))
        self.metrics.refused.labels(self._hops.label(partition)).inc()
        log.warning(
            "level %s: delivery refused (%s); retry %d in %.2f s",
            self._hops.label(partition),
            why,
            attempt,
            wait,
        )

    def _committed(self, batch: Batch) -> None:
        self.metrics.count(batch, self.clock.now_ms(), self._hops.label)
        for send in batch.sends:
            entry = send.entry
            if send.kind == "dropped" and entry.item.message_id is not None:
                if self._recalls is not None:
                    self._recalls.forget(entry.item.message_id)
                log.info(
                    "dropped recalled timer %s",
                    entry.item.message_id,
                    extra={"msg_id": entry.item.message_id},
                )
            elif send.kind == "aside" and self._asides.admit(send.reason) is not None:
                log.warning(
                    "%s offset %d (message %s): %s; set aside to retry, the level goes on",
                    self._where(entry.partition),
                    entry.offset,
                    message_id_of(send),
                    send.reason,
                    extra={"msg_id": message_id_of(send)},
                )
            elif send.kind == "park":
                log.error(
                    "parked %s offset %d (message %s) in %s: %s",
                    self._where(entry.partition),
                    entry.offset,
                    message_id_of(send),
                    naming.POISON_TOPIC,
                    send.reason,
                    extra={"msg_id": message_id_of(send)},
                )
        self.refusals.committed(
            ((s.entry.partition, s.entry.offset) for s in batch.sends), batch.positions
        )
        for partition in batch.positions:
            self._heads.unblock(partition)

    def _labels(self, partitions: list[TopicPartition]) -> list[str]:
        known = self._hops.partitions
        return [
            self._hops.label(p) if p < known else f"partition {p}"
            for p in sorted(tp.partition for tp in partitions)
        ]

    def _where(self, partition: int) -> str:
        return f"{SCHEDULE} partition {partition} (level {self._hops.label(partition)})"

    # -- group membership -------------------------------------------------------------------

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        consumer = self.consumer()
        unknown = [tp for tp in partitions if tp.partition >= self._hops.partitions]
        partitions = [tp for tp in partitions if tp.partition < self._hops.partitions]
        if unknown:  # added by hand after start: no level is stored there
            consumer.pause(unknown)
            log.error(
                "%s %s: no level or hop of these delay levels; left unread (Kafka cannot remove "
                "partitions, and new forwarders refuse this topic until the levels match it)",
                naming.SCHEDULE_TOPIC,
                self._labels(unknown),
            )
        # A level paused before it was lost may come back still paused in librdkafka, while
        # _forget() dropped it from _paused: nothing would ever resume it.
        if partitions:
            consumer.resume(partitions)
        self._assigned.update(tp.partition for tp in partitions)
        log.info("assigned levels %s", self._labels(partitions))

    def on_dropped(self, partitions: list[TopicPartition], how: str) -> None:
        self._forget(partitions, how, logging.WARNING if how == "lost" else logging.INFO)

    def _forget(
        self, partitions: list[TopicPartition], how: str, level: int = logging.INFO
    ) -> None:
        """Drop what is held for these levels: their next owner reads them again from the
        committed positions."""
        for tp in partitions:
            self._assigned.discard(tp.partition)
            self._paused.discard(tp.partition)
            self.refusals.forget(tp.partition)
            self._heads.drop(tp.partition)
        log.log(level, "%s levels %s", how, self._labels(partitions))

    # -- observability ----------------------------------------------------------------------

    @property
    def heads(self) -> HeadOfLine[Parked]:
        """The records held per level, waiting for their due time (read-only use)."""
        return self._heads

    def update_backlog(self) -> dict[int, int]:
        """Refresh the backlog gauge from the consumer's positions and cached end offsets."""
        if self._consumer is None:
            return {}
        assigned = [TopicPartition(SCHEDULE, p) for p in sorted(self._assigned)]
        positions = self._consumer.position(assigned)
        return self.metrics.update_backlog(
            self._consumer, positions, self._heads.waiting(), self._hops.label
        )
