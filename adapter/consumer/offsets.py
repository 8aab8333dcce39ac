"""Commit only what is finished: a per-partition tracker of the contiguous finished prefix.

Reproduces RocketMQ's ``ProcessQueue`` offset rule: with concurrent consumption, the offset a
queue reports is the smallest offset still being processed, so a slow or failed message is
never skipped by faster ones after it. Kafka commits one position per partition, so the
tracker turns per-message acknowledgements into that position.

Offsets need not be contiguous (transaction markers leave gaps). They arrive in increasing
order per partition, unless the log went back: tracking then restarts there.

Known gaps: after the log went back, a callback still running for an old offset may finish
one of the same number fetched again; it then counts as done (it was consumed once).
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

    def track(self, offset: int) -> bool:
        """Track a fetched offset. True when it comes before one tracked already: the log went
        back (truncated after an unclean leader election, or the position was reset), and
        tracking restarts there, forgetting what was in flight (it is fetched again)."""
        went_back = self._next is not None and offset < self._next
        if went_back:
            self._pending.clear()
            self._done.clear()
            self._committed = None
        self._pending.append(offset)
        self._next = offset + 1
        return went_back

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
    def fetched_up_to(self) -> int | None:
        """One past the last offset tracked."""
        return self._next

    @property
    def position(self) -> int | None:
        """The offset to commit, or ``None`` before anything was tracked."""
        if self._pending:
            return self._pending[0]
        return self._next

    def take_commit(self) -> int | None:
        """The position to commit, if it differs from the last one Kafka confirmed."""
        position = self.position
        if position is None or position == self._committed:
            return None
        return position

    def committed(self, offset: int) -> None:
        """Kafka confirmed a commit of ``offset`` (until then :meth:`take_commit` offers the
        position again: an asynchronous commit may fail)."""
        self._committed = offset
