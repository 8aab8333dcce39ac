"""The invisible duration of received messages, kept in the client under a share group's lock.

Reproduces the 5.x pop consumer's invisibility (``receive(max, invisible_duration)``,
``ack``, ``change_invisible_duration``): a received message stays invisible to the group for
its own invisible duration; acked, it is gone; neither acked nor changed, it comes back when
that duration ends, never earlier; ``change_invisible_duration(m, d)`` makes it invisible for
``d`` from now (``0``: back at once).

A Kafka share group (KIP-932) has no per-message duration: each record is locked for the
group's ``share.record.lock.duration.ms`` from the moment the broker hands it to a consumer,
and librdkafka cannot renew a lock. So this book keeps, for every record a consumer holds:

- ``lock_until``: the earliest moment the broker may let the lock go, minus a safety margin.
  The lock starts when the broker hands the record to librdkafka, which may be before the
  poll that returns it (:class:`FetchWindow` says how much before), so the window's start
  plus the lock duration is a floor;
- ``deadline``: when the application's invisible duration ends; the shell then RELEASEs the
  record, and the broker hands it out again with its delivery count + 1.

A record is handed out, and a change accepted, only if its deadline falls before
``lock_until``: the broker never redelivers a message before its invisible duration ends. A
duration beyond that is refused (``BadRequestException``, ``ILLEGAL_INVISIBLE_TIME``) with what
could be held. Records a poll returned beyond ``max_message_num`` wait here, locked, for the
next ``receive``; one that can no longer be handed out with at least ``MIN_HOLD_S`` left is
released.

Pure: no Kafka, time from an injected :class:`~adapter.clock.Clock`. Not thread-safe; the shell
holds a lock around it.

The book remembers how often each record went back unseen (past its lock, or beyond what
could be handed out in time): Kafka counts those fetches, RocketMQ counts an attempt only when
the application gets the message, so the shell takes them off Kafka's delivery count.

Known gaps (docs/v5.md has the whole list): the longest invisible duration is
the lock duration minus ``HEADROOM_S``; the unseen releases are remembered by this process
only (another consumer of the group that fetches the record counts them as attempts).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from adapter.clock import Clock
from adapter.v5.exception import BadRequestException

__all__ = ["HEADROOM_S", "MARGIN_S", "MIN_HOLD_S", "FetchWindow", "InvisibilityBook", "Lease"]

T = TypeVar("T")

ILLEGAL_INVISIBLE_TIME = 40011
"""The 5.x protocol's ``Code.ILLEGAL_INVISIBLE_TIME``."""
INVALID_RECEIPT_HANDLE = 40013
"""The 5.x protocol's ``Code.INVALID_RECEIPT_HANDLE`` (an expired or unknown handle)."""

MARGIN_S = 1.0
"""Kept between a deadline and the broker's lock expiry (timer granularity, clock rates)."""
HEADROOM_S = 3.0
"""Lock time a fresh record may have used before it is handed out (one poll, plus the
margin): the longest invisible duration accepted is the lock duration minus this."""
MIN_HOLD_S = 1.0
"""A waiting record with less lock than this left is released rather than handed out."""
UNSEEN_KEPT = 100_000
"""Records whose unseen releases the book remembers (the oldest are forgotten first)."""


class FetchWindow:
    """Since when one share consumer's next poll may return records the broker locked.

    librdkafka fetches outside ``poll`` too (measured with 2.16 on Kafka 4.3): a poll that
    returns nothing may leave a fetch out that acquires records for the next poll (a fetch
    waits at most ``fetch_wait_s`` at the broker, so it was sent at most that long before the
    empty poll started), and acknowledging may send a fetch along; while a consumer holds
    every record of its last poll unacknowledged it fetches nothing. So a poll's records were
    locked no earlier than the earliest of: this poll's start, the previous empty poll's start
    less ``fetch_wait_s``, and the first acknowledgement since the last poll that returned
    records (or the subscription, for the first poll).
    """

    __slots__ = ("_fetch_wait_s", "_since")

    def __init__(self, subscribed_at: float, fetch_wait_s: float) -> None:
        self._fetch_wait_s = fetch_wait_s
        self._since: float | None = subscribed_at

    def poll_started(self, now: float) -> float:
        """The floor of the lock of what the poll starting ``now`` returns."""
        return now if self._since is None else min(self._since, now)

    def poll_ended(self, started: float, got_records: bool) -> None:
        self._since = None if got_records else started - self._fetch_wait_s

    def acknowledged(self, now: float) -> None:
        if self._since is None:
            self._since = now

    def subscribed(self, now: float) -> None:
        self._since = now if self._since is None else min(self._since, now)


@dataclass(slots=True)
class Lease(Generic[T]):
    """One record a consumer of the pool holds: fetched (``deadline`` None) or handed out."""

    handle: str
    member: Hashable
    record: T
    lock_until: float
    name: str = ""
    """The record's stable name (its topic, partition and offset), the same at every fetch."""
    deadline: float | None = None
    settling: bool = False
    """Acked or going back: on its way to Kafka, which has not answered yet."""
    not_before: float = 0.0
    """Not handed out before this (monotonic): fetched again while an ack of it was in flight
    or after Kafka refused that ack, it waits out the invisible duration of that delivery."""

    @property
    def handed_out(self) -> bool:
        return self.deadline is not None


class InvisibilityBook(Generic[T]):
    """Every record the pool's consumers hold, by receipt handle."""

    def __init__(self, lock_s: float, clock: Clock) -> None:
        if lock_s <= HEADROOM_S:
            raise ValueError(f"a lock duration of {lock_s} s leaves no invisible duration")
        self._lock_s = lock_s
        self._clock = clock
        self._leases: dict[str, Lease[T]] = {}
        self._serial = itertools.count(1)
        self._unseen: dict[str, int] = {}
        """Times each record went back to the group unseen, by name, until it is settled."""
        self._acking: dict[str, float] = {}
        """The deadline of each record being acked, or whose ack Kafka refused, by name (until
        that deadline passes). Kafka may hand such a record out again (its partition's leader
        moved) before the ack fails; RocketMQ shows a message whose ack failed again only when
        its invisible duration ends, so the new fetch waits until then."""

    @property
    def lock_s(self) -> float:
        return self._lock_s

    @property
    def longest_s(self) -> float:
        """The longest invisible duration a fresh record can be handed out with."""
        return self._lock_s - HEADROOM_S

    def check_duration(self, invisible_s: float, what: str = "invisible_duration") -> float:
        """``invisible_s`` as seconds, or ``BadRequestException`` saying what is allowed."""
        if isinstance(invisible_s, bool) or not isinstance(invisible_s, (int, float)):
            raise BadRequestException(
                f"{what} must be a number of seconds, got {invisible_s!r}", ILLEGAL_INVISIBLE_TIME
            )
        if not 0 <= invisible_s <= self.longest_s:
            raise BadRequestException(
                f"{what} {invisible_s} s is out of range: on Kafka a message can be held "
                f"invisible for at most {self.longest_s:g} s (the share group's record lock "
                f"duration, {self._lock_s:g} s, less {HEADROOM_S:g} s); raise the lock "
                "duration (SimpleConsumer(lock_duration=...), within the broker's "
                "group.share.max.record.lock.duration.ms) or ack sooner",
                ILLEGAL_INVISIBLE_TIME,
            )
        return float(invisible_s)

    # -- records in -------------------------------------------------------------------------

    def fetched(
        self, member: Hashable, records: Iterable[tuple[str, T]], locked_since: float
    ) -> list[Lease[T]]:
        """Records a poll of ``member`` returned, locked no earlier than ``locked_since``
        (monotonic); ``records`` pairs a stable name of each record with the record.

        A record the book holds already (a partition whose leader moved lost its acquisition
        locks, and Kafka handed it out again) keeps its lease, handle and deadline, now with
        this fetch; the earlier fetch is returned, settling, for its member to release (the
        member holds it until :meth:`settled`). A record being acked, or whose ack was
        refused, is not handed out before the deadline of the delivery that was acked."""
        until = locked_since + self._lock_s - MARGIN_S
        held = {lease.name: lease for lease in self._leases.values() if not lease.settling}
        earlier = []
        for name, record in records:
            lease = held.get(name)
            if lease is None:
                lease = Lease(f"{name}#{next(self._serial)}", member, record, until, name)
                lease.not_before = self._acking.get(name, 0.0)
                self._leases[lease.handle] = lease
                continue
            old = Lease(f"{lease.handle}~{next(self._serial)}", lease.member, lease.record,
                        lease.lock_until, name, lease.deadline, settling=True)  # fmt: skip
            self._leases[old.handle] = old
            earlier.append(old)
            lease.record, lease.member, lease.lock_until = record, member, until
            self._unseen[name] = self._unseen.get(name, 0) + 1
        return earlier

    def names(self) -> set[str]:
        """The names of the records in the book (fetched or handed out, not settling)."""
        return {lease.name for lease in self._leases.values() if not lease.settling}

    def hand_out(self, max_count: int, invisible_s: float) -> list[Lease[T]]:
        """Up to ``max_count`` waiting records that can stay invisible for ``invisible_s``
        before their lock ends, oldest lock first, now invisible until their deadline."""
        now = self._clock.monotonic()
        deadline = now + invisible_s
        ready = sorted(
            (
                lease
                for lease in self._leases.values()
                if lease.deadline is None
                and not lease.settling
                and lease.not_before <= now
                and deadline <= lease.lock_until
            ),
            key=lambda lease: lease.lock_until,
        )[:max_count]
        for lease in ready:
            lease.deadline = deadline
        return ready

    # -- records out ------------------------------------------------------------------------

    def get(self, handle: str | None) -> Lease[T]:
        """The handed-out record of ``handle``; ``BadRequestException`` when it is no longer
        held (acked, changed to 0, or its invisible duration ended and it went back)."""
        lease = self._leases.get(handle) if handle else None
        if lease is None or lease.deadline is None or lease.settling:
            raise BadRequestException(
                f"receipt handle {handle!r} is invalid or expired: the message was acked "
                "already, or its invisible duration ended and it went back to the group",
                INVALID_RECEIPT_HANDLE,
            )
        return lease

    def settle(self, handle: str | None) -> Lease[T]:
        """A handed-out record is being acked (its handle is no longer valid); as :meth:`get`
        when unknown. Its member holds it until :meth:`settled`."""
        lease = self.get(handle)
        lease.settling = True
        self.forget(lease.name)
        if lease.deadline is not None:
            self._acking[lease.name] = lease.deadline
        return lease

    def settled(self, lease: Lease[T], *, refused: bool = False) -> None:
        """Kafka answered for a record being acked or going back: out of the book. An ack
        ``refused`` leaves the record to come back, but not before its deadline."""
        self._leases.pop(lease.handle, None)
        if not refused:
            self._acking.pop(lease.name, None)

    def unseen(self, name: str) -> int:
        """How often the record named ``name`` went back to the group without being handed
        out (Kafka counted those fetches; RocketMQ would not count them as attempts)."""
        return self._unseen.get(name, 0)

    def forget(self, name: str) -> None:
        """The record named ``name`` is settled for good (acked, filtered, dead-lettered)."""
        self._unseen.pop(name, None)

    def change(self, handle: str | None, invisible_s: float) -> Lease[T]:
        """Make a handed-out record invisible for ``invisible_s`` from now; refused, and the
        record left as it was, when its lock ends before that."""
        lease = self.get(handle)
        seconds = self.check_duration(invisible_s)
        now = self._clock.monotonic()
        if now + seconds > lease.lock_until:
            left = max(0.0, lease.lock_until - now)
            raise BadRequestException(
                f"cannot keep message {handle!r} invisible for {seconds:g} s: Kafka's lock on "
                f"it ends in {left:.1f} s and cannot be renewed (the share group's record lock "
                f"duration is {self._lock_s:g} s from the moment it was fetched); ask for at "
                f"most {int(left)} s, or ack it",
                ILLEGAL_INVISIBLE_TIME,
            )
        lease.deadline = now + seconds
        return lease

    def due(self) -> list[Lease[T]]:
        """What must go back to the group now: handed-out records whose invisible duration
        ended, and waiting ones that can no longer be handed out in time. Their member holds
        them until :meth:`settled`."""
        now = self._clock.monotonic()
        going = [
            lease
            for lease in self._leases.values()
            if not lease.settling
            and (
                (lease.deadline is not None and lease.deadline <= now)
                or (lease.deadline is None and lease.lock_until - now < MIN_HOLD_S)
            )
        ]
        for lease in going:
            lease.settling = True
            if lease.deadline is None:
                self._unseen[lease.name] = self._unseen.get(lease.name, 0) + 1
        for name, until in list(self._acking.items()):
            if until <= now:
                del self._acking[name]
        while len(self._unseen) > UNSEEN_KEPT:  # records another consumer settled
            del self._unseen[next(iter(self._unseen))]
        return going

    def next_due(self) -> float | None:
        """When :meth:`due` will next have something (monotonic), or ``None``."""
        times = [
            lease.deadline if lease.deadline is not None else lease.lock_until - MIN_HOLD_S
            for lease in self._leases.values()
            if not lease.settling
        ]
        return min(times, default=None)

    def holds(self, member: Hashable) -> bool:
        """Whether ``member`` still holds a record, or one on its way to Kafka (it may not
        poll until it holds none: librdkafka refuses a poll while one is unacknowledged)."""
        return any(lease.member == member for lease in self._leases.values())

    def handed_out(self) -> int:
        """Records handed out and not settled yet (being acked or going back included)."""
        return sum(1 for lease in self._leases.values() if lease.deadline is not None)

    def waiting(self) -> int:
        """Records fetched and not handed out yet."""
        return sum(
            1 for lease in self._leases.values() if lease.deadline is None and not lease.settling
        )

    def drop_member(self, member: Hashable) -> list[Lease[T]]:
        """Forget everything ``member`` held (it closed; the broker releases its records)."""
        gone = [lease for lease in self._leases.values() if lease.member == member]
        for lease in gone:
            del self._leases[lease.handle]
        return gone
