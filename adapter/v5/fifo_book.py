"""The FIFO consumer's book: which fetched record may be handed out, and what Kafka may commit.

Reproduces the 5.x broker's FIFO (orderly) pop for one consumer: per queue (a Kafka
partition) the records are kept in offset order, each with its message group (``__SHARDINGKEY``),
its state (waiting; held until a deadline under a receipt handle; dead, on its way to
``%DLQ%<group>``; done) and its attempt. :meth:`FifoBook.take` hands out only the oldest
not-done record of each message group of a partition, and only while it waits: the next
message of a group never comes while an earlier one is held, waiting or being moved to the
dead letters; a failing message holds back its own group only. Records without a message
group are independent. One not acked within its invisible duration waits again, at the same
order position, with attempt + 1; past the max attempts it is dead (the shell moves it to
the dead-letter topic, then :meth:`FifoBook.buried` lets its group go on).

Kafka keeps one position per partition, so :meth:`FifoBook.committable` is the first offset
not done (the 2.0 consumer's :class:`~adapter.consumer.offsets.PartitionOffsets`): a commit
never passes an un-acked record.

Pure: no Kafka, time from an injected :class:`~adapter.clock.Clock`; not thread-safe (the shell
holds a lock around it).

A partition that moves to another consumer carries its state in the commit's metadata:
:meth:`FifoBook.note` writes it, :meth:`FifoBook.restore` reads it (:mod:`adapter.v5.fifo_note`).

Known gaps: the receipt handle does not change on :meth:`FifoBook.change`; a record dead on
a partition's restore goes to the dead letters at once (its last invisible duration may not
have ended).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from adapter.clock import Clock
from adapter.consumer.offsets import PartitionOffsets
from adapter.v5.exception import BadRequestException
from adapter.v5.fifo_note import Carried, decode, encode
from adapter.v5.invisibility import ILLEGAL_INVISIBLE_TIME, INVALID_RECEIPT_HANDLE

__all__ = ["MAX_INVISIBLE_S", "Entry", "FifoBook", "Handed", "State"]

T = TypeVar("T")

MAX_INVISIBLE_S = 12 * 3600.0
"""The longest invisible duration, as the 5.x proxy's ``maxInvisibleTimeMills`` (12 h)."""


class State(Enum):
    WAITING = "waiting"
    HELD = "held"
    DEAD = "dead"
    """Past its attempts (or forwarded): on its way to the dead-letter topic; holds its group."""
    DONE = "done"


@dataclass(slots=True, eq=False)
class Entry(Generic[T]):
    """One fetched record of a partition, as the book keeps it."""

    partition: Hashable
    offset: int
    group: str | None
    record: T
    state: State = State.WAITING
    attempt: int = 1
    """The delivery attempt it is (or was last) handed out with."""
    handle: str | None = None
    deadline: float | None = None
    reason: str = ""
    """Why it is dead."""
    not_before: float | None = None
    """Held by the partition's previous owner until then (monotonic): not handed out before."""


@dataclass(frozen=True, slots=True)
class Handed(Generic[T]):
    """A record as :meth:`FifoBook.take` handed it out (the entry itself changes later)."""

    handle: str
    record: T
    attempt: int
    partition: Hashable
    offset: int
    group: str | None


@dataclass(slots=True)
class _Partition(Generic[T]):
    entries: dict[int, Entry[T]] = field(default_factory=dict)
    """The records not done, by offset, in offset order."""
    offsets: PartitionOffsets = field(default_factory=PartitionOffsets)
    done_ahead: set[int] = field(default_factory=set)
    """Offsets past the committable one that are done (for the next owner)."""
    carried: Carried = field(default_factory=Carried)
    """What the previous owner's note said, applied as the records arrive."""
    confirmed: tuple[int, str] | None = None
    """The position and note Kafka last confirmed."""
    start: int | None = None
    """The committed position it was assigned at (the committable one until a record comes)."""


class FifoBook(Generic[T]):
    """Every record a FIFO consumer fetched and has not finished, by partition."""

    def __init__(self, clock: Clock, max_attempts: int) -> None:
        if max_attempts < 1:
            raise ValueError(f"max attempts must be 1 or more, got {max_attempts}")
        self._clock = clock
        self._max_attempts = max_attempts
        self._parts: dict[Hashable, _Partition[T]] = {}
        self._handles: dict[str, Entry[T]] = {}
        self._serial = itertools.count(1)
        self._turn = 0

    @staticmethod
    def check_duration(invisible_s: float, what: str = "invisible_duration") -> float:
        """``invisible_s`` as seconds, or ``BadRequestException`` saying what is allowed."""
        if isinstance(invisible_s, bool) or not isinstance(invisible_s, (int, float)):
            raise BadRequestException(
                f"{what} must be a number of seconds, got {invisible_s!r}", ILLEGAL_INVISIBLE_TIME
            )
        if not 0 <= invisible_s <= MAX_INVISIBLE_S:
            raise BadRequestException(
                f"{what} {invisible_s} s is out of range (0 to {MAX_INVISIBLE_S:g} s)",
                ILLEGAL_INVISIBLE_TIME,
            )
        return float(invisible_s)

    # -- records in -------------------------------------------------------------------------

    def add(self, partition: Hashable, offset: int, group: str | None, record: T) -> None:
        """A record fetched from ``partition``, in offset order. An offset at or before one
        added already means the log went back (or the partition was fetched again from an
        earlier position): the partition's records are forgotten, their handles invalid."""
        part = self._parts.setdefault(partition, _Partition())
        if part.offsets.track(offset):
            self._forget(part)
        entry = part.entries[offset] = Entry(partition, offset, group, record)
        if offset in part.carried.done:
            self._finish(entry)  # acked at the previous owner, past its commit
            return
        used, until_ms = part.carried.used.get(offset, (0, None))
        if used >= self._max_attempts:
            self._die(entry, used)
            return
        entry.attempt = used + 1
        if until_ms is not None and until_ms > self._clock.now_ms():
            entry.not_before = self._clock.monotonic() + (until_ms - self._clock.now_ms()) / 1000

    def restore(self, partition: Hashable, position: int, note: str | None) -> None:
        """The partition is assigned at committed ``position`` with the previous owner's
        ``note`` (:mod:`adapter.v5.fifo_note`): its acks, attempts and invisible durations
        apply to the records as they are added."""
        part = self._parts.setdefault(partition, _Partition())
        part.carried = decode(position, note)
        part.start = position
        part.confirmed = (position, note or "")

    def passed(self, partition: Hashable, offset: int) -> None:
        """A record fetched and done at once (one the subscription's filter does not take)."""
        self.add(partition, offset, None, None)  # type: ignore[arg-type]
        entry = self._parts[partition].entries.get(offset)
        if entry is not None:
            self._finish(entry)

    # -- handing out ------------------------------------------------------------------------

    def take(self, max_count: int, invisible_s: float) -> list[Handed[T]]:
        """Up to ``max_count`` waiting records, each the oldest not-done record of its message
        group in its partition, now held for ``invisible_s`` under a fresh receipt handle.
        Partitions take turns, so one partition's backlog does not starve the others."""
        self._lapse()
        now = self._clock.monotonic()
        parts = list(self._parts.items())
        if not parts:
            return []
        self._turn = (self._turn + 1) % len(parts)
        parts = parts[self._turn :] + parts[: self._turn]
        ready = [_ready(part, now) for _key, part in parts]
        out: list[Handed[T]] = []
        while len(out) < max_count and ready:
            for candidates in list(ready):
                entry = next(candidates, None)
                if entry is None:
                    ready.remove(candidates)
                    continue
                entry.state = State.HELD
                entry.deadline = now + invisible_s
                handle = f"{_label(entry.partition)}:{entry.offset}#{next(self._serial)}"
                entry.handle = handle
                self._handles[handle] = entry
                out.append(
                    Handed(
                        handle,
                        entry.record,
                        entry.attempt,
                        entry.partition,
                        entry.offset,
                        entry.group,
                    )  # fmt: skip
                )
                if len(out) == max_count:
                    break
        return out

    # -- records out ------------------------------------------------------------------------

    def ack(self, handle: str | None) -> Entry[T]:
        """The held record of ``handle`` is done; ``BadRequestException`` (INVALID_RECEIPT_HANDLE)
        when the handle is unknown, spent, expired or of a partition given up."""
        entry = self._held(handle)
        self._finish(entry)
        return entry

    def change(self, handle: str | None, invisible_s: float) -> Entry[T]:
        """Keep the held record invisible for ``invisible_s`` from now (``0``: back at once,
        with attempt + 1, as an invisible duration that ended)."""
        entry = self._held(handle)
        entry.deadline = self._clock.monotonic() + self.check_duration(invisible_s)
        return entry

    def forward(self, handle: str | None, reason: str) -> Entry[T]:
        """The held record goes to the dead-letter topic now (a FIFO push consumer's own
        verdict after its local retries); it holds its group until :meth:`buried`."""
        entry = self._held(handle)
        self._handles.pop(str(handle), None)
        entry.state, entry.handle, entry.deadline, entry.reason = State.DEAD, None, None, reason
        return entry

    def expire(self) -> list[Entry[T]]:
        """Held records past their deadline wait again with attempt + 1, or are dead past the
        max attempts; returns every dead record (to move to the dead-letter topic)."""
        self._lapse()
        return [
            entry
            for part in self._parts.values()
            for entry in part.entries.values()
            if entry.state is State.DEAD
        ]

    def buried(self, entry: Entry[T]) -> None:
        """A dead record is in the dead-letter topic: done (ignored if its partition went)."""
        part = self._parts.get(entry.partition)
        if part is not None and part.entries.get(entry.offset) is entry:
            self._finish(entry)

    def drop(self, partition: Hashable) -> int:
        """Forget ``partition`` (revoked or lost); its handles are invalid. How many records
        were not done."""
        part = self._parts.pop(partition, None)
        if part is None:
            return 0
        left = len(part.entries)
        self._forget(part)
        return left

    # -- what the shell asks ----------------------------------------------------------------

    def committable(self, partition: Hashable) -> int | None:
        """The offset Kafka may commit for ``partition``: its first record not done, or one
        past the last added when all are; ``None`` when nothing was added (or it was dropped)."""
        part = self._parts.get(partition)
        if part is None:
            return None
        return part.start if part.offsets.position is None else part.offsets.position

    def to_commit(self, partition: Hashable) -> tuple[int, str] | None:
        """:meth:`committable` and its :meth:`note`, if they differ from what Kafka last
        confirmed."""
        part = self._parts.get(partition)
        position = self.committable(partition)
        if part is None or position is None:
            return None
        pair = (position, self.note(partition))
        return None if pair == part.confirmed else pair

    def committed(self, partition: Hashable, offset: int, note: str) -> None:
        """Kafka confirmed a commit of ``offset`` with ``note`` for ``partition``."""
        part = self._parts.get(partition)
        if part is not None:
            part.confirmed = (offset, note)

    def note(self, partition: Hashable) -> str:
        """What the partition's next owner needs beyond the committable offset: the records
        done past it, the attempts used and the invisible durations of those not done."""
        part = self._parts.get(partition)
        position = self.committable(partition)
        if part is None or position is None:
            return ""
        part.done_ahead = {o for o in part.done_ahead if o >= position}
        now, now_ms = self._clock.monotonic(), self._clock.now_ms()
        fetched_up_to = part.offsets.fetched_up_to or position
        states = [(o, u, t) for o, (u, t) in part.carried.used.items() if o >= fetched_up_to]
        for entry in part.entries.values():
            until = entry.deadline if entry.state is State.HELD else entry.not_before
            used = {State.WAITING: entry.attempt - 1, State.DEAD: self._max_attempts}.get(
                entry.state, entry.attempt
            )
            if used or until is not None:
                held_ms = None if until is None else now_ms + round((until - now) * 1000)
                states.append((entry.offset, used, held_ms))
        done = part.done_ahead | {o for o in part.carried.done if o >= fetched_up_to}
        return encode(position, done, states)

    def partitions(self) -> list[Hashable]:
        return list(self._parts)

    def unfinished(self, partition: Hashable) -> int:
        """Records of ``partition`` not done (the shell pauses a partition holding many)."""
        part = self._parts.get(partition)
        return 0 if part is None else len(part.entries)

    def held(self) -> int:
        """Records handed out and neither acked nor lapsed yet."""
        return len(self._handles)

    def next_deadline(self) -> float | None:
        """The earliest deadline of a held record, or end of a previous owner's hold
        (monotonic), or ``None``."""
        times = [e.deadline for e in self._handles.values() if e.deadline is not None]
        times += [
            e.not_before
            for part in self._parts.values()
            for e in part.entries.values()
            if e.not_before is not None and e.state is State.WAITING
        ]
        return min(times, default=None)

    # -- internals --------------------------------------------------------------------------

    def _held(self, handle: str | None) -> Entry[T]:
        self._lapse()
        entry = self._handles.get(handle) if handle else None
        if entry is None:
            raise BadRequestException(
                f"receipt handle {handle!r} is invalid or expired: the message was acked "
                "already, its invisible duration ended (it comes back with its attempt + 1), "
                "or its queue moved to another consumer of the group",
                INVALID_RECEIPT_HANDLE,
            )
        return entry

    def _lapse(self) -> None:
        now = self._clock.monotonic()
        for handle, entry in list(self._handles.items()):
            if entry.deadline is None or entry.deadline > now:
                continue
            del self._handles[handle]
            entry.handle, entry.deadline = None, None
            if entry.attempt >= self._max_attempts:
                self._die(entry, entry.attempt)
            else:
                entry.state = State.WAITING
                entry.attempt += 1

    def _die(self, entry: Entry[T], used: int) -> None:
        entry.state, entry.attempt = State.DEAD, used
        entry.reason = f"delivered {used} times without an ack (max attempts {self._max_attempts})"

    def _finish(self, entry: Entry[T]) -> None:
        part = self._parts[entry.partition]
        del part.entries[entry.offset]
        part.offsets.ack(entry.offset)
        part.done_ahead.add(entry.offset)
        if entry.handle is not None:
            self._handles.pop(entry.handle, None)
        entry.state, entry.handle, entry.deadline = State.DONE, None, None

    def _forget(self, part: _Partition[T]) -> None:
        for entry in part.entries.values():
            if entry.handle is not None:
                self._handles.pop(entry.handle, None)
            entry.handle, entry.deadline = None, None
        part.entries.clear()


def _ready(part: _Partition[T], now: float) -> Iterator[Entry[T]]:
    """The waiting records of a partition that no earlier record of their group holds back,
    in offset order (not one its previous owner still holds)."""
    blocked: set[str] = set()
    for entry in list(part.entries.values()):
        if entry.group is not None:
            if entry.group in blocked:
                continue
            blocked.add(entry.group)
        if entry.state is State.WAITING and (entry.not_before or 0.0) <= now:
            yield entry


def _label(partition: Hashable) -> str:
    if isinstance(partition, tuple):
        return ":".join(str(p) for p in partition)
    return str(partition)
