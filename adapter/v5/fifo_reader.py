"""The Kafka side of a FIFO ``SimpleConsumer``: a consumer group, its poll thread and the book.

Reproduces the 5.x broker's FIFO pop on Kafka: the group is a classic Kafka consumer group of
the RocketMQ group's name (the 2.0 consumer's settings: read_committed, manual commits,
cooperative-sticky, earliest start), so each queue (partition) is read by one consumer of
the group, in offset order. A poll thread feeds every record to the pure
:class:`~adapter.v5.fifo_book.FifoBook`, which decides what ``receive`` may hand out (one
record at a time per message group). The message group is the ``__SHARDINGKEY`` property
(5.x ``message_group``), else the Kafka record key (a 2.0 ``send_orderly_with_sharding_key``);
a record with neither is independent. The poll thread also commits the book's committable
offsets (soon after each ack, every second, and synchronously when partitions are revoked),
pauses a partition with more than ``max_unfinished`` records not done (until half are), and
moves dead records to ``%DLQ%<group>`` through the 2.0 consumer's send-back. Every call on
the Kafka consumer is made on the poll thread.

A partition's commit carries, in its metadata, what the next owner needs (acks past the
position, attempts, invisible durations: :mod:`adapter.v5.fifo_note`); a newly assigned
partition reads it back (:meth:`FifoBook.restore <adapter.v5.fifo_book.FifoBook.restore>`).

Known gaps: an ack returns before its commit reaches Kafka (at most a poll turn later), so
a crash just after it delivers the message again; a consumer that loses its partitions
without committing (its session ended) leaves the last note it committed; a message the
application holds when its partition is revoked can no longer be acked (its handle is
invalid) and comes back from the new owner once its invisible duration ends; a partition
holding ``max_unfinished`` records not done is paused, so a message group failing that long
holds back the groups behind it in its partition; the group's name must not be a share
group's (a ``SimpleConsumer``'s).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.clock import Clock
from adapter.config import KafkaSettings
from adapter.consumer.config import DEFAULT_MAX_IN_FLIGHT_PER_QUEUE, ConsumerConfig
from adapter.consumer.loop import commit_positions
from adapter.consumer.send_back import SendBack
from adapter.exceptions import AdapterError
from adapter.kafka import clients, reading
from adapter.logs import RepeatLimiter, shape
from adapter.message_filter import MessageFilter, admits
from adapter.v5.exception import InternalErrorException
from adapter.v5.fetched import received
from adapter.v5.fifo_book import MAX_INVISIBLE_S, FifoBook, Handed
from adapter.v5.message import Message

__all__ = ["FifoReader", "message_group"]

log = logging.getLogger(__name__)

Filters = Callable[[], Mapping[str, MessageFilter]]
"""The current subscriptions: Kafka topic name -> tag or SQL92 filter."""
Key = tuple[str, int]

POLL_S = 0.1
COMMIT_EVERY_S = 1.0
RETRY_DEAD_LETTER_S = 1.0
NOTE_WAIT_S = 10.0
"""How long a newly assigned partition's committed note is waited for."""
CLOSE_WAIT_S = 30.0
"""How long ``close`` waits for held messages to be acked or come back, at most."""


class FifoReader:
    """The consumer, poll thread, book and dead letters of one FIFO consumer."""

    def __init__(
        self,
        *,
        kafka: KafkaSettings,
        group: str,
        client_id: str,
        max_attempts: int,
        send_back: SendBack,
        filters: Filters,
        clock: Clock,
        max_unfinished: int = DEFAULT_MAX_IN_FLIGHT_PER_QUEUE,
    ) -> None:
        self.book: FifoBook[KafkaRecord] = FifoBook(clock, max_attempts)
        self.filtered = 0
        """Messages skipped by the filters, consumed unseen."""
        self._group = group
        self._send_back = send_back
        self._filters = filters
        self._clock = clock
        self._max_unfinished = max(2, max_unfinished)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._assigned: set[Key] = set()
        self._paused: set[Key] = set()
        self._commit_wanted = False
        self._sent: dict[Key, tuple[int, str]] = {}
        """The position and note last sent to Kafka for each partition."""
        self._last_commit = clock.monotonic()
        self._dead_retry_at: dict[tuple[Key, int], float] = {}
        self._fatal: KafkaError | None = None
        self._errors = RepeatLimiter(30.0, clock.monotonic)
        config = ConsumerConfig(kafka, group, instance_name=client_id)
        self._client = clients.consumer(
            {**config.librdkafka(), "on_commit": self._on_commit}, announce=True
        )
        self._topics: list[str] = []
        self._follow(sorted(filters()))
        self._closing = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"fifo-{group}", daemon=True)
        self._thread.start()

    # -- what the consumer asks -----------------------------------------------------------------

    @property
    def longest_s(self) -> float:
        return MAX_INVISIBLE_S

    def check_duration(self, invisible_s: float) -> float:
        return self.book.check_duration(invisible_s)

    def receive(self, max_count: int, invisible_s: float, await_s: float) -> list[Message]:
        """Up to ``max_count`` records the book lets go, waiting up to ``await_s`` for one."""
        deadline = self._clock.monotonic() + await_s
        with self._wake:
            while True:
                if self._fatal is not None:
                    raise InternalErrorException(
                        f"the consumer of group {self._group!r} failed for good: "
                        f"{self._fatal.str()}", 50000,
                    )  # fmt: skip
                taken = self.book.take(max_count, invisible_s)
                now = self._clock.monotonic()
                if taken or now >= deadline or self._closing.is_set():
                    break
                wait = deadline - now
                due = self.book.next_deadline()
                if due is not None:
                    wait = min(wait, max(0.0, due - now) + 0.001)
                self._wake.wait(min(wait, 1.0))
        return [_message(handed) for handed in taken]

    def ack(self, message: Message) -> None:
        with self._wake:
            self.book.ack(message.receipt_handle)
            self._commit_wanted = True
            self._wake.notify_all()  # the next record of its group may go

    def change(self, message: Message, invisible_s: float) -> None:
        with self._wake:
            self.book.change(message.receipt_handle, invisible_s)
            self._wake.notify_all()

    def forward_to_dead_letters(self, message: Message, why: str) -> None:
        with self._wake:
            self.book.forward(message.receipt_handle, why)

    def close(self, *, wait_for_held: bool = True) -> None:
        """Stop handing out; wait for held messages to be acked or come back (at most
        ``CLOSE_WAIT_S``, not at all without ``wait_for_held``); commit; leave the group."""
        self._closing.set()
        limit = self._clock.monotonic() + (CLOSE_WAIT_S if wait_for_held else 0.0)
        with self._wake:
            self._wake.notify_all()
            while self.book.held() and self._clock.monotonic() < limit:
                self.book.expire()
                self._wake.wait(0.1)
        self._stopping.set()
        self._thread.join(CLOSE_WAIT_S + 30)

    # -- the poll thread ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    self._turn()
                except (KafkaException, AdapterError) as exc:
                    log.warning("group %s: %s", self._group, exc)
                    self._stopping.wait(1.0)
        except Exception:
            log.exception("group %s: the FIFO poll loop failed", self._group)
        finally:
            self._finish()

    def _turn(self) -> None:
        self._follow(sorted(self._filters()))
        self._pause_or_resume()
        records = reading.fetch(self._client, 500, POLL_S)
        if records:
            self._add(records)
        self._move_dead_letters()
        now = self._clock.monotonic()
        if self._commit_wanted or now - self._last_commit >= COMMIT_EVERY_S:
            self._last_commit = now
            self._commit(None, synchronous=False)

    def _follow(self, topics: list[str]) -> None:
        """Subscribe to ``topics`` when they changed (none: leave the group's partitions)."""
        if topics == self._topics:
            return
        self._topics = topics
        if not topics:
            self._client.unsubscribe()
            return
        self._client.subscribe(
            topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def _add(self, records: list[KafkaRecord]) -> None:
        filters = self._filters()
        with self._wake:
            for record in records:
                error = record.error()
                if error is not None:
                    self._on_error(error)
                    continue
                topic, partition = str(record.topic()), int(record.partition() or 0)
                key, offset = (topic, partition), int(record.offset() or 0)
                chosen = filters.get(topic)
                if key not in self._assigned or chosen is None:
                    continue  # revoked or unsubscribed during this poll
                properties = received(record, 1).properties
                if not admits(chosen, properties):
                    self.book.passed(key, offset)
                    self.filtered += 1
                    self._commit_wanted = True
                    continue
                self.book.add(key, offset, message_group(record, properties), record)
            self._wake.notify_all()

    def _move_dead_letters(self) -> None:
        with self._lock:
            dead = self.book.expire()
        now = self._clock.monotonic()
        for entry in dead:
            name = (cast(Key, entry.partition), entry.offset)
            if self._dead_retry_at.get(name, 0.0) > now:
                continue
            try:
                self._send_back.dead_letter(received(entry.record, entry.attempt), entry.reason)
            except (AdapterError, KafkaException) as exc:
                log.error(
                    "group %s: could not move %s to the dead-letter topic (%s); its message "
                    "group waits, trying again", self._group, name, exc,
                )  # fmt: skip
                self._dead_retry_at[name] = now + RETRY_DEAD_LETTER_S
                continue
            self._dead_retry_at.pop(name, None)
            with self._wake:
                self.book.buried(entry)
                self._commit_wanted = True
                self._wake.notify_all()

    def _pause_or_resume(self) -> None:
        pause, resume = [], []
        with self._lock:
            for key in self._assigned:
                unfinished = self.book.unfinished(key)
                if key not in self._paused and unfinished >= self._max_unfinished:
                    self._paused.add(key)
                    pause.append(TopicPartition(*key))
                elif key in self._paused and unfinished < self._max_unfinished // 2:
                    self._paused.discard(key)
                    resume.append(TopicPartition(*key))
        if pause:
            self._client.pause(pause)
        if resume:
            self._client.resume(resume)

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error
            log.error("group %s: the consumer failed for good: %s", self._group, error.str())
            return
        if error.code() == KafkaError._PARTITION_EOF:
            return
        held = self._errors.admit(shape(error.str()))
        if held is not None:
            more = f" ({held} more like it in the last 30 s)" if held else ""
            log.warning("group %s: %s%s", self._group, error.str(), more)

    # -- assignment and commits -----------------------------------------------------------------

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """Take the partitions, with what their previous owner left in its commit's metadata
        (:mod:`adapter.v5.fifo_note`; without it, acked records past the position come again
        and attempts start at 1)."""
        try:
            committed = (
                self._client.committed(partitions, timeout=NOTE_WAIT_S) if partitions else []
            )
        except KafkaException as exc:
            log.warning("group %s: committed offsets unreadable (%s)", self._group, exc)
            committed = []
        with self._lock:
            for tp in committed:
                if tp.error is None and tp.offset >= 0 and tp.metadata:
                    self.book.restore((tp.topic, tp.partition), tp.offset, tp.metadata)
            self._assigned.update((tp.topic, tp.partition) for tp in partitions)
        log.info("group %s assigned %s", self._group, _describe(partitions))

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        self._commit(keys, synchronous=True, forget=True)
        log.info("group %s revoked %s", self._group, _describe(partitions))

    def _on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        with self._wake:
            self._forget([(tp.topic, tp.partition) for tp in partitions])
        log.warning("group %s lost %s", self._group, _describe(partitions))

    def _forget(self, keys: list[Key]) -> None:
        """Drop the partitions of ``keys``: their handles are invalid (the caller holds the
        lock)."""
        for key in keys:
            held = self.book.drop(key)
            if held:
                log.info(
                    "group %s: %d unfinished messages of %s[%d] go to its new owner",
                    self._group, held, naming.decode(key[0]), key[1],
                )  # fmt: skip
            self._assigned.discard(key)
            self._paused.discard(key)
            self._sent.pop(key, None)
        self._wake.notify_all()

    def _commit(self, keys: list[Key] | None, *, synchronous: bool, forget: bool = False) -> None:
        """Commit the book's position and note of ``keys`` (all: ``None``) that changed; with
        ``forget``, drop them under the same lock, so that nothing is handed out between the
        last note and the drop."""
        offsets = []
        with self._wake:
            self._commit_wanted = False
            for key in cast(list[Key], self.book.partitions()) if keys is None else keys:
                pair = self.book.to_commit(key)
                if pair is not None:
                    self._sent[key] = pair
                    offsets.append(TopicPartition(key[0], key[1], pair[0], metadata=pair[1]))
            if forget and keys is not None:
                self._forget(keys)
        commit_positions(
            self._client, offsets, synchronous=synchronous, on_commit=self._on_commit,
            group=self._group,
        )  # fmt: skip

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if error is not None:
            if error.code() != KafkaError._NO_OFFSET:
                log.warning("group %s: commit failed: %s", self._group, error.str())
                with self._lock:
                    self._commit_wanted = True
            return
        with self._lock:
            for tp in partitions:
                key = (tp.topic, tp.partition)
                sent = self._sent.get(key)
                if tp.error is None and sent is not None and sent[0] == tp.offset:
                    self.book.committed(key, *sent)

    def _finish(self) -> None:
        try:
            self._move_dead_letters()
            self._commit(None, synchronous=True)
            self._client.close()
        except (KafkaException, AdapterError, RuntimeError) as exc:
            log.warning("group %s: close failed: %s", self._group, exc)
        with self._wake:
            self._closing.set()
            self._wake.notify_all()


def message_group(record: KafkaRecord, properties: Mapping[str, Any]) -> str | None:
    """A record's FIFO message group: ``__SHARDINGKEY``, else its Kafka key, else none."""
    group = properties.get(prop.SHARDING_KEY)
    if group is None:
        group = record.key()
    if group is None or group in (b"", ""):
        return None
    return group if isinstance(group, str) else bytes(group).decode("utf-8", "backslashreplace")


def _message(handed: Handed[KafkaRecord]) -> Message:
    return Message.from_received(
        received(handed.record, handed.attempt),
        delivery_attempt=handed.attempt,
        receipt_handle=handed.handle,
    )


def _describe(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{naming.decode(tp.topic)}[{tp.partition}]" for tp in partitions) or "-"
