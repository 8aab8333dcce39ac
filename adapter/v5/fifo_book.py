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

Known gaps: attempts live in this book only (a partition that moves to another consumer
starts its records at attempt 1 there); the receipt handle does not change on
:meth:`FifoBook.change`.
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
        part.entries[offset] = Entry(partition, offset, group, record)

    def passed(self, partition: Hashable, offset: int) -> None:
        """A record fetched and done at once (one the subscription's filter does not take)."""
        self.add(partition, offset, None, None)  # type: ignore[arg-type]
        self._finish(self._parts[partition].entries[offset])

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
        ready = [_ready(part) for _key, part in parts]
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
        return None if part is None else part.offsets.position

    def to_commit(self, partition: Hashable) -> int | None:
        """:meth:`committable`, if it differs from what Kafka last confirmed."""
        part = self._parts.get(partition)
        return None if part is None else part.offsets.take_commit()

    def committed(self, partition: Hashable, offset: int) -> None:
        """Kafka confirmed a commit of ``offset`` for ``partition``."""
        part = self._parts.get(partition)
        if part is not None:
            part.offsets.committed(offset)

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
        """The earliest deadline of a held record (monotonic), or ``None``."""
        return min((e.deadline for e in self._handles.values() if e.deadline), default=None)

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
                entry.state = State.DEAD
                entry.reason = (
                    f"delivered {entry.attempt} times without an ack "
                    f"(max attempts {self._max_attempts})"
                )
            else:
                entry.state = State.WAITING
                entry.attempt += 1

    def _finish(self, entry: Entry[T]) -> None:
        part = self._parts[entry.partition]
        del part.entries[entry.offset]
        part.offsets.ack(entry.offset)
        if entry.handle is not None:
            self._handles.pop(entry.handle, None)
        entry.state, entry.handle, entry.deadline = State.DONE, None, None

    def _forget(self, part: _Partition[T]) -> None:
        for entry in part.entries.values():
            if entry.handle is not None:
                self._handles.pop(entry.handle, None)
            entry.handle, entry.deadline = None, None
        part.entries.clear()


def _ready(part: _Partition[T]) -> Iterator[Entry[T]]:
    """The waiting records of a partition that no earlier record of their group holds back,
    in offset order."""
    blocked: set[str] = set()
    for entry in list(part.entries.values()):
        if entry.group is not None:
            if entry.group in blocked:
                continue
            blocked.add(entry.group)
        if entry.state is State.WAITING:
            yield entry


def _label(partition: Hashable) -> str:
    if isinstance(partition, tuple):
        return ":".join(str(p) for p in partition)
    return str(partition)
