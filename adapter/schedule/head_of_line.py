"""Head-of-line scheduling of one level per partition, as RocketMQ's per-level timer task does.

Reproduces ``DeliverDelayedMessageTimerTask``: the records of a level are kept in store order and
only the head is examined; while it is not due, nothing behind it is (all records of a level
share one delay, so a later record is never due earlier). Unlike RocketMQ there is no 100 ms
re-scan: the caller waits exactly until ``next_wakeup_ms()``.

Fetching can wait too: a level is paused (:meth:`HeadOfLine.should_pause`) only once it holds
``high_bytes`` whose head is not due, and fetches again when the head falls due or half of that
is gone (:meth:`HeadOfLine.may_resume`). Pausing earlier would make the records behind a waiting
head wait for a fresh fetch after the resume (librdkafka drops a paused partition's prefetched
records), which added up to its fetch wait (100 ms) to their lateness.

A partition can also be blocked until a time (its real topic refused a delivery and is being
retried with back-off); the other partitions go on. Entries taken for a batch are handed back
with ``put_back`` if the batch fails, so nothing is skipped. A record at or before one pushed
already (:meth:`HeadOfLine.read_already`) was delivered again by a consumer whose position went
back; the caller skips it.

Known gaps: none. Pure: no clock and no Kafka; the caller passes ``now_ms``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    partition: int
    offset: int
    due_ms: int
    item: T
    size: int = 0
    """Bytes it holds in memory."""


class HeadOfLine(Generic[T]):
    def __init__(self) -> None:
        self._queues: dict[int, deque[Entry[T]]] = {}
        self._blocked_until: dict[int, int] = {}
        self._bytes: dict[int, int] = {}
        self._read_to: dict[int, int] = {}
        """Per partition, the offset after the last record pushed."""
        self._start = 0

    def read_already(self, partition: int, offset: int) -> bool:
        """Whether a record at ``offset`` of ``partition`` was pushed before (or lies before
        one that was): a consumer whose position went back delivers it again, and it must not
        be forwarded twice."""
        return offset < self._read_to.get(partition, -1)

    def push(self, entry: Entry[T]) -> None:
        if self.read_already(entry.partition, entry.offset):
            raise ValueError(
                f"partition {entry.partition}: offset {entry.offset} after "
                f"{self._read_to[entry.partition] - 1}"
            )
        self._queues.setdefault(entry.partition, deque()).append(entry)
        self._read_to[entry.partition] = entry.offset + 1
        self._bytes[entry.partition] = self._bytes.get(entry.partition, 0) + entry.size

    def take_due(self, now_ms: int, limit: int) -> list[Entry[T]]:
        """Remove and return due heads, in order per partition, at most ``limit`` in all.

        Partitions take turns in starting the batch, so a busy level cannot starve the others.
        """
        taken: list[Entry[T]] = []
        partitions = sorted(self._queues)
        if not partitions:
            return taken
        self._start = (self._start + 1) % len(partitions)
        for partition in partitions[self._start :] + partitions[: self._start]:
            if self._blocked_until.get(partition, 0) > now_ms:
                continue
            queue = self._queues[partition]
            while queue and len(taken) < limit and queue[0].due_ms <= now_ms:
                entry = queue.popleft()
                self._bytes[partition] -= entry.size
                taken.append(entry)
        return taken

    def put_back(self, entries: Iterable[Entry[T]]) -> None:
        """Return entries taken by ``take_due`` to the head of their partitions, in order."""
        for entry in reversed(list(entries)):
            self._queues.setdefault(entry.partition, deque()).appendleft(entry)
            self._bytes[entry.partition] = self._bytes.get(entry.partition, 0) + entry.size

    def block(self, partition: int, until_ms: int) -> None:
        self._blocked_until[partition] = until_ms

    def unblock(self, partition: int) -> None:
        self._blocked_until.pop(partition, None)

    def drop(self, partition: int) -> None:
        """Forget a partition (it was revoked): its records are read again by the next owner."""
        self._queues.pop(partition, None)
        self._blocked_until.pop(partition, None)
        self._bytes.pop(partition, None)
        self._read_to.pop(partition, None)

    def next_wakeup_ms(self) -> int | None:
        """When the earliest head becomes due (or its block ends); ``None`` when all is empty."""
        times = [
            max(queue[0].due_ms, self._blocked_until.get(partition, 0))
            for partition, queue in self._queues.items()
            if queue
        ]
        return min(times) if times else None

    def head_waits(self, partition: int, now_ms: int) -> bool:
        """The partition's head is not due yet, or the partition is blocked."""
        queue = self._queues.get(partition)
        if not queue:
            return False
        return queue[0].due_ms > now_ms or self._blocked_until.get(partition, 0) > now_ms

    def held_bytes(self, partition: int) -> int:
        return self._bytes.get(partition, 0)

    def should_pause(self, partition: int, now_ms: int, high_bytes: int) -> bool:
        """Stop fetching the partition: its head waits and it holds ``high_bytes`` or more."""
        return self.head_waits(partition, now_ms) and self.held_bytes(partition) >= high_bytes

    def may_resume(self, partition: int, now_ms: int, high_bytes: int) -> bool:
        """Fetch a paused partition again: its head is due, or it holds under half of
        ``high_bytes`` (the gap keeps a level from flapping between paused and fetching)."""
        low = high_bytes // 2
        return not self.head_waits(partition, now_ms) or self.held_bytes(partition) < low

    def waiting(self) -> dict[int, int]:
        """How many records wait per partition."""
        return {p: len(q) for p, q in self._queues.items() if q}

    def head(self, partition: int) -> Entry[T] | None:
        queue = self._queues.get(partition)
        return queue[0] if queue else None
