"""Where a ``LitePushConsumer`` stands in each lite topic it subscribed, and what it delivers. Pure.

A lite topic's messages are in one partition of its parent topic (the lite topic is their
routing key), in send order. The consumer reads the parent topic's partitions itself and
keeps, per subscribed lite topic, ``next``: the offset from which its messages are still to be
consumed. A record is handed to the listener when its lite topic is subscribed, its offset is
at or past ``next`` and it was not handed over already (a partition read again after a seek
brings records back); once consumed, ``next`` moves past it. Each subscription has its own
number: a record handed over under an earlier one (and still waiting when its lite topic was
unsubscribed) is skipped, since the new subscription reads it again. A partition is read from
the smallest ``next`` of its subscribed lite topics; one without any is not read at all.

The progress of every lite topic consumed is kept (unsubscribing keeps it), and
:meth:`LiteBook.changed` gives what moved since it was last asked, for the consumer to save.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LiteBook", "Progress"]


@dataclass(frozen=True)
class Progress:
    """A lite topic's partition and the offset its messages are still to be consumed from."""

    partition: int
    next: int


@dataclass
class LiteBook:
    """The subscribed lite topics of one consumer, and the progress of every one it knew."""

    _progress: dict[str, Progress] = field(default_factory=dict)
    _handed: dict[str, int] = field(default_factory=dict)
    """Per subscribed lite topic, the last offset handed to the listener."""
    _changed: set[str] = field(default_factory=set)
    _subscriptions: int = 0
    _subscribed: dict[str, int] = field(default_factory=dict)
    """The subscribed lite topics, each with the number of its subscription."""

    def known(self, progress: dict[str, Progress]) -> None:
        """Progress saved earlier (by this group's consumers), for lite topics not seen yet."""
        for lite, where in progress.items():
            self._progress.setdefault(lite, where)

    def subscribe(self, lite: str, partition: int, end: int) -> Progress:
        """Consume ``lite`` (in ``partition``): from its saved progress, or from ``end`` (the
        partition's end now) when it has none; where it starts."""
        where = self._progress.get(lite)
        if where is None or where.partition != partition:
            where = self._progress[lite] = Progress(partition, end)
            self._changed.add(lite)
        self._handed.pop(lite, None)
        self._subscriptions += 1
        self._subscribed[lite] = self._subscriptions
        return where

    def unsubscribe(self, lite: str) -> None:
        self._subscribed.pop(lite, None)
        self._handed.pop(lite, None)

    def subscribed(self, lite: str) -> bool:
        return lite in self._subscribed

    def subscription(self, lite: str) -> int | None:
        """The number of ``lite``'s subscription now (None when not subscribed): a record handed
        over under another is no longer the listener's."""
        return self._subscribed.get(lite)

    def count(self) -> int:
        return len(self._subscribed)

    def hand(self, lite: str | None, offset: int) -> bool:
        """Whether a record of ``lite`` at ``offset`` goes to the listener now (it is then
        counted as handed over)."""
        if lite is None or lite not in self._subscribed:
            return False
        if offset < self._progress[lite].next or offset <= self._handed.get(lite, -1):
            return False
        self._handed[lite] = offset
        return True

    def consumed(self, lite: str, offset: int) -> None:
        """The record of ``lite`` at ``offset`` was consumed (or moved to the dead letters)."""
        where = self._progress.get(lite)
        if where is not None and offset >= where.next:
            self._progress[lite] = Progress(where.partition, offset + 1)
            self._changed.add(lite)

    def start(self, partition: int) -> int | None:
        """Where ``partition`` is to be read from: the smallest ``next`` of its subscribed lite
        topics past what was handed over; None when none of them is in it."""
        starts = [
            max(self._progress[lite].next, self._handed.get(lite, -1) + 1)
            for lite in self._subscribed
            if self._progress[lite].partition == partition
        ]
        return min(starts, default=None)

    def partitions(self) -> set[int]:
        """The partitions holding a subscribed lite topic."""
        return {self._progress[lite].partition for lite in self._subscribed}

    def changed(self) -> dict[str, Progress]:
        """The progress that moved since the last call."""
        moved = {lite: self._progress[lite] for lite in self._changed}
        self._changed.clear()
        return moved
