"""Commit only what is finished: a per-partition tracker of the contiguous finished prefix.

Reproduces RocketMQ's ``ProcessQueue`` offset rule: with concurrent consumption, the offset a
queue reports is the smallest offset still being processed, so a slow or failed message is
never skipped by faster ones after it. Kafka commits one position per partition, so the
tracker turns per-message acknowledgements into that position.

Known gaps: none known. Offsets need not be contiguous (transaction markers leave gaps); the
tracker only relies on them arriving in increasing order per partition.
"""

from __future__ import annotations

from collections import deque


class PartitionOffsets:
    """In-flight offsets of one partition, in arrival order.

    ``track`` each offset as it is handed out, ``ack`` it when finished (in any order);
    ``position`` is then the offset to commit: the first unfinished one, or one past the
    last tracked when everything is finished.
    """

    __slots__ = ("_pending", "_done", "_next", "_committed")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._done: set[int] = set()
        self._next: int | None = None
        self._committed: int | None = None

    def track(self, offset: int) -> None:
        if self._next is not None and offset < self._next:
            raise ValueError(f"offset {offset} tracked after {self._next - 1}")
        self._pending.append(offset)
        self._next = offset + 1

    def ack(self, offset: int) -> None:
        pending = self._pending
        if pending and offset == pending[0]:
            pending.popleft()
            done = self._done
            while pending and pending[0] in done:
                done.discard(pending.popleft())
        else:
            self._done.add(offset)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def position(self) -> int | None:
        """The offset to commit, or ``None`` before anything was tracked."""
        if self._pending:
            return self._pending[0]
        return self._next

    def take_commit(self) -> int | None:
        """The position if it moved since the last call (then remembered as committed)."""
        position = self.position
        if position is None or position == self._committed:
            return None
        self._committed = position
        return position
