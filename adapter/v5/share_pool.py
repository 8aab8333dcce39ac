"""The pool of share consumers behind one ``SimpleConsumer``: receive, ack, release, dead letters.

Reproduces the proxy's side of 5.x pop consumption on a Kafka share group: ``receive`` hands
out up to a count of messages, each invisible for its own duration
(:mod:`adapter.v5.invisibility` keeps the deadlines under Kafka's lock); ``ack`` ACCEPTs the
record and commits at once; a reaper thread RELEASEs each record whose invisible duration
ended, at that moment (Kafka then hands it out again with its delivery count + 1); a record
delivered past the group's max attempts is moved to ``%DLQ%<group>``
(:mod:`adapter.v5.dead_letters`); a record whose tag the subscription does not take is
ACCEPTed unseen.

librdkafka refuses a poll while a record of the previous poll is unacknowledged, so each
member (:class:`~adapter.v5.share_group.Member`) polls only when it holds nothing (nor has an
ack or release of one in flight), and the pool opens another member (up to
``max_consumers``) once the others have held records for a moment
(:data:`~adapter.v5.share_members.OPEN_AFTER_S`). Free members are polled in turn (the one
polled longest ago first): a share group assigns each partition to some members only, so a
member left unpolled strands its partitions. A record Kafka hands out again while the
application holds it (its partition's leader moved, which loses the acquisition locks) keeps
its handle and deadline: the pool acks or releases it through the new fetch. One handed out
again while its ack is in flight (that ack will fail) waits out the acked delivery's deadline.

A topic made for priorities (:mod:`adapter.priorities`) is received highest band first: each
member serves one band (its Kafka topics), and ``receive`` polls the bands in the order
:class:`~adapter.priorities.BandTurns` gives, so a lower band's records are fetched only while no
higher band may hold any (or after a lower band waited ``MAX_HOLD_S``).

Known gaps: a member that joins the group gets its first records a few seconds after it
subscribes (the share group's assignment), so a lower band waits ``JOIN_S`` for a higher band
that turns out empty. Another process of the group that gets a record
again after a leader move may show it before its invisible duration ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from adapter import naming
from adapter.clock import Clock
from adapter.config import KafkaSettings
from adapter.consumer.send_back import SendBack
from adapter.message_filter import MessageFilter, admits
from adapter.v5.dead_letters import DeadLetter, DeadLetters
from adapter.v5.exception import (
    BadRequestException,
    ClientException,
    IllegalStateException,
    InternalErrorException,
    NotFoundException,
    translate,
)
from adapter.v5.fetched import Fetched, received
from adapter.v5.group_commit import Key, Refusal
from adapter.v5.invisibility import INVALID_RECEIPT_HANDLE, MARGIN_S, InvisibilityBook, Lease
from adapter.v5.message import Message
from adapter.v5.share_group import ACCEPT, RELEASE, Member, Verdict, judge_delivery
from adapter.v5.share_members import Members

__all__ = ["SharePool"]

log = logging.getLogger(__name__)

FIRST_SLICE_S = 0.02
POLL_SLICE_S = 1.0
"""How long one member's poll may block a receive: ``FIRST_SLICE_S`` at first, doubling after
each poll that brought nothing, up to ``POLL_SLICE_S``. A member whose fetch has nothing for it
waits out its whole poll while records come to another: with a push consumer acking one batch
while it asks for the next, a fixed 1 s slice made every receive wait about 1 s (send to
listener through the proxy p50 4-7 s; growing from 20 ms: p50 25 ms, p99 86 ms, 2026-11-26).
A member holding a record not yet acked fetches nothing more (librdkafka refuses the poll), so
a consumer that keeps several messages before acking makes the pool open another member, which
must first join the share group: seconds, up to a minute on a busy broker."""
CONSUMER_GROUP_NOT_FOUND = 40403
"""The 5.x protocol's ``Code.CONSUMER_GROUP_NOT_FOUND``."""
_LOCK_LOST = (KafkaError.INVALID_RECORD_STATE, KafkaError._STATE)

Filters = Callable[[], Mapping[str, MessageFilter]]
"""The current subscriptions: Kafka topic name -> tag filter."""


class SharePool:
    """Members, the invisibility book, the reaper and the dead letters of one consumer."""

    def __init__(
        self,
        *,
        kafka: KafkaSettings,
        group: str,
        client_id: str,
        lock_ms: int,
        max_attempts: int,
        delivery_limit: int,
        max_consumers: int,
        send_back: SendBack,
        filters: Filters,
        timeout_s: float,
        clock: Clock,
    ) -> None:
        self.book: InvisibilityBook[Fetched] = InvisibilityBook(lock_ms / 1000, clock)
        self._kafka, self._group, self._client_id = kafka, group, client_id
        self._lock_ms = lock_ms
        self._max_attempts = max_attempts
        self._limit = delivery_limit
        self._send_back = send_back
        self._filters = filters
        self.filtered = 0
        """Messages filtered out (tag or SQL92) and accepted unseen, as RocketMQ skips them."""
        self._timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._members = Members(
            make=self._new_member, max_consumers=max_consumers, lock=self._lock, clock=clock,
            busy=lambda m: m.polling or self._dead.holds(m.index) or self.book.holds(m.index),
        )  # fmt: skip
        self._dead = DeadLetters(
            group=group, send_back=send_back, max_attempts=max_attempts, limit=delivery_limit,
            clock=clock, timeout_s=timeout_s, lock=self._lock,
        )  # fmt: skip
        self._stopping = threading.Event()
        self._closing = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name=f"reap-{group}", daemon=True)
        self._reaper.start()

    # -- what the consumer asks -----------------------------------------------------------------

    @property
    def longest_s(self) -> float:
        return self.book.longest_s

    def check_duration(self, invisible_s: float) -> float:
        return self.book.check_duration(invisible_s)

    def receive(self, max_count: int, invisible_s: float, await_s: float) -> list[Message]:
        """Waiting records first; else polls (a free member) until ``await_s`` has passed, at
        least once."""
        deadline = self._clock.monotonic() + await_s
        polled, slice_s = False, FIRST_SLICE_S
        tried: set[int] = set()  # bands polled in vain by this receive
        while not self._closing.is_set():
            with self._lock:
                leases = self.book.hand_out(max_count, invisible_s)
                if leases:
                    self._wake.notify_all()
            if leases:
                return [_message(lease) for lease in leases]
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0 and polled:
                return []
            member = self._members.next_to_poll(self._filters(), tried)
            if member is None:
                if remaining <= 0:
                    return []
                with self._wake:
                    self._wake.wait(min(remaining, 0.1))
                continue
            polled = True
            try:
                self._poll(member, max(0.0, min(remaining, slice_s)))
            finally:
                with self._lock:
                    member.polling = False
            tried.add(member.band)
            slice_s = min(POLL_SLICE_S, slice_s * 2)  # nothing came, or it is handed out above
            if member.fatal is not None:
                raise _fatal(member.fatal, self._group)
        return []

    def ack(self, message: Message) -> None:
        with self._lock:
            lease = self.book.settle(message.receipt_handle)
            member = self._members.get(int(lease.member))  # type: ignore[call-overload]
        if member is None:
            raise IllegalStateException("unable to ack message: the consumer has shut down")
        refused: dict[Key, Refusal] | None = None
        try:
            refused = member.settle([(lease.record.record, ACCEPT)], self._timeout_s)
        finally:
            with self._lock:  # the member may poll again
                self.book.settled(lease, refused=refused is None or bool(refused))
                self._wake.notify_all()
        if not refused:
            return
        refusal = next(iter(refused.values()))
        if refusal.unconfirmed or refusal.error.code() in _LOCK_LOST:
            why = str(refusal)
            if not (refusal.unconfirmed or refusal.shared_with):
                why = f"its lock ended before the ack arrived ({why})"
            raise BadRequestException(
                f"ack of {message.message_id} refused by Kafka: {why}; it will be delivered again",
                INVALID_RECEIPT_HANDLE,
            )
        failure = KafkaException(refusal.error)
        what = f"ack message {message.message_id} (it may be delivered again)"
        raise translate(failure, what) from failure

    def forward_to_dead_letters(self, message: Message, why: str) -> None:
        """Move a handed-out message to ``%DLQ%<group>`` (then accept it), as the reaper moves
        one past its max attempts; unknown or settled handles are refused as by :meth:`ack`."""
        with self._lock:
            lease = self.book.settle(message.receipt_handle)
            self._dead.add(
                lease.member, [DeadLetter(lease.name, lease.record, lease.lock_until, why)]
            )
            self.book.settled(lease)  # held as a dead letter now
            self._wake.notify_all()

    def change(self, message: Message, invisible_s: float) -> None:
        with self._lock:
            self.book.change(message.receipt_handle, invisible_s)
            self._wake.notify_all()

    def close(self, *, wait_for_held: bool = True) -> None:
        """Wait until every handed-out record is acked or released (at most a lock: closing
        a member earlier would let Kafka redeliver its records early), then close. Without
        ``wait_for_held``, close at once: no ack can come any more (the proxy stopped serving),
        so the records held go back to the group now."""
        self._closing.set()
        with self._wake:
            limit = self._clock.monotonic() + (self.book.lock_s if wait_for_held else 0.0)
            while self._handed_out() and self._clock.monotonic() < limit:
                self._wake.wait(0.1)
        self._stopping.set()
        with self._wake:
            self._wake.notify_all()
        self._reaper.join(10)
        for member in list(self._members.values()):
            member.close()
        self._members.clear()

    # -- members --------------------------------------------------------------------------------

    def _handed_out(self) -> bool:
        return self.book.handed_out() > 0

    def _new_member(self, index: int, band: int, topics: list[str]) -> Member:
        log.info("group %s: share consumer %d opened (band %d)", self._group, index, band)
        return Member(
            index, self._kafka, self._group, self._client_id, topics,
            lock_ms=self._lock_ms, clock=self._clock, band=band,
        )  # fmt: skip

    def _poll(self, member: Member, timeout_s: float) -> None:
        filters = dict(self._filters())
        topics = [t for t in filters if naming.priority_band(t) == member.band]
        if not topics:  # its band was unsubscribed
            return
        records, locked_since = member.poll(timeout_s, topics)
        self._members.polled(member, brought=bool(records))
        lock_until = locked_since + self.book.lock_s - MARGIN_S
        names = [f"{r.topic()}:{r.partition()}:{r.offset()}" for r in records]
        with self._lock:
            unseen = [self.book.unseen(name) for name in names]
            holding = self.book.names().intersection(names)
        keep: list[tuple[str, Fetched]] = []
        settle, dead, settled = [], [], []
        for record, name, released in zip(records, names, unseen, strict=True):
            count = int(record.delivery_count() or 1)
            attempt, verdict = judge_delivery(
                kafka_count=count, unseen=released, max_attempts=self._max_attempts,
                limit=self._limit,
            )  # fmt: skip
            fetched = Fetched(record, received(record, attempt), attempt, count)
            chosen = filters.get(str(record.topic()))
            if name in holding:  # handed out again while held: not a delivery (see the book)
                attempt = max(1, attempt - 1)
                again = Fetched(record, received(record, attempt), attempt, count,
                                verdict is not Verdict.DELIVER)  # fmt: skip
                keep.append((name, again))
            elif chosen is None:  # unsubscribed meanwhile: for the group's other consumers
                settle.append((record, RELEASE))
            elif verdict is Verdict.DEAD:
                # Dead-lettered as its last failed delivery, as the 2.0 send-back does.
                fetched = Fetched(record, received(record, attempt - 1), attempt, count)
                why = self._dead.why(fetched, seen=False)
                dead.append(DeadLetter(name, fetched, lock_until, why))
            elif not admits(chosen, fetched.received.properties):
                settle.append((record, ACCEPT))  # filtered out: consumed, as RocketMQ skips it
                settled.append(name)
            else:
                last = verdict is Verdict.LAST
                keep.append((name, Fetched(record, fetched.received, attempt, count, last)))
        with self._lock:
            earlier = self.book.fetched(member.index, keep, locked_since)
            for name in settled:
                self.book.forget(name)
            self.filtered += len(settled)
            self._dead.add(member.index, dead)
        for old in earlier:
            log.warning(
                "group %s: Kafka handed out %s again while it is held (its partition's leader "
                "moved?); it stays invisible until its deadline", self._group, old.name,
            )  # fmt: skip
            try:
                holder = self._members[int(old.member)]  # type: ignore[call-overload]
                holder.settle([(old.record.record, RELEASE)], self._timeout_s)
            finally:
                with self._lock:
                    self.book.settled(old)
        if dead:
            self._dead.move(member, self.book.forget)
        if settle:
            member.settle(settle, self._timeout_s)

    def _reap(self) -> None:
        """Release every record whose invisible duration ended (and waiting ones whose lock
        is ending) when it is due; retry dead letters Kafka refused. A failure is logged and
        the next turn tries again (Kafka's lock is the backstop: it ends later)."""
        while not self._stopping.is_set():
            try:
                self._reap_once()
            except Exception:
                log.exception("group %s: releasing messages failed", self._group)
                self._stopping.wait(1.0)

    def _reap_once(self) -> None:
        with self._lock:
            due = []
            for lease in self.book.due():
                if lease.record.last:  # Kafka's limit leaves no more: a dead letter
                    fetched = lease.record
                    if not lease.handed_out:
                        fetched = Fetched(
                            fetched.record,
                            received(fetched.record, fetched.attempt - 1),
                            fetched.attempt,
                            fetched.kafka_count,
                        )
                    why = self._dead.why(fetched, seen=lease.handed_out)
                    letter = DeadLetter(lease.name, fetched, lease.lock_until, why)
                    self._dead.add(lease.member, [letter])
                    self.book.settled(lease)  # held as a dead letter now
                else:
                    due.append(lease)
            nearest = self.book.next_due()
            dead = [self._members[i] for i in self._dead.members() if not self._members[i].polling]
            for member in dead:
                member.polling = True
        by_member: dict[Any, list[Any]] = {}
        for lease in due:
            by_member.setdefault(lease.member, []).append(lease.record.record)
            if not lease.handed_out:
                log.debug(
                    "group %s: record %s released unseen (its lock is ending)",
                    self._group, lease.handle,
                )  # fmt: skip
            else:
                log.info(
                    "group %s: message %s not acked within its invisible duration; "
                    "back to the group",
                    self._group, lease.record.received.id,
                    extra={"group": self._group, "attempt": lease.record.attempt},
                )  # fmt: skip
        for index, records in by_member.items():
            try:
                self._members[index].settle([(r, RELEASE) for r in records], self._timeout_s)
            finally:
                with self._lock:
                    for lease in due:
                        if lease.member == index:
                            self.book.settled(lease)
        for member in dead:
            try:
                self._dead.move(member, self.book.forget)
            finally:
                with self._lock:
                    member.polling = False
        with self._wake:
            if due:
                self._wake.notify_all()
            wait = 0.5 if nearest is None else nearest - self._clock.monotonic()
            if wait > 0 and not self._stopping.is_set():
                self._wake.wait(min(wait, 0.5))


def _fatal(error: KafkaError, group: str) -> ClientException:
    """What a share consumer's fatal error means to the application."""
    text = f"the share consumer of group {group!r} failed for good: {error.str()}"
    if error.code() == KafkaError.GROUP_ID_NOT_FOUND:
        return NotFoundException(
            f"{text} (is {group!r} also a Kafka consumer group's name?)", CONSUMER_GROUP_NOT_FOUND
        )
    return InternalErrorException(text, 50000)


def _message(lease: Lease[Fetched]) -> Message:
    fetched = lease.record
    return Message.from_received(
        fetched.received, delivery_attempt=fetched.attempt, receipt_handle=lease.handle
    )
