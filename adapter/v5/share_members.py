"""The share consumers of one ``SimpleConsumer``'s pool, and which of them to poll next.

Each member serves one priority band: its Kafka topics of the subscribed topics (band 0: the
topics themselves; :mod:`adapter.priorities`). ``next_to_poll`` picks a free member of the band
to poll now: of the bands :class:`~adapter.priorities.BandTurns` lets through, the highest one
the current receive has not polled in vain yet; within a band, the member polled longest ago
(a share group assigns each partition to some of its members only, so every member must be
polled in turn, or the partitions only it is assigned are fetched by no one). A band's members
are opened as needed, up to ``max_consumers`` in all but at least one per band; with several
bands every band gets its first member at once, so that they join the share group together.

Another member of a band is opened only once every member of it has been busy for
:data:`OPEN_AFTER_S`: a member is busy while the application holds its records, and a push
consumer asks for its next batch while it acks the last, so opening at once gave a paced push
consumer through the proxy 8 members within 10 s, each join moving the group's partitions
(send to listener p50 285-415 ms, against 34-36 ms with one or two members, 2026-11-26).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

from adapter import naming
from adapter.clock import Clock
from adapter.priorities import BandTurns
from adapter.v5.share_group import Member

__all__ = ["Members", "next_to_poll"]

OPEN_AFTER_S = 0.25
"""How long every member of a band must have been busy before another one is opened: longer
than a batch's acks take, shorter than a backlog would wait."""

MakeMember = Callable[[int, int, list[str]], Member]
"""Opens a member: (its index, its band, its Kafka topics)."""


class Members:
    """The pool's members by index; guarded by the pool's lock."""

    def __init__(
        self,
        *,
        make: MakeMember,
        max_consumers: int,
        lock: threading.Lock,
        clock: Clock,
        busy: Callable[[Member], bool],
    ) -> None:
        self._make = make
        self._max = max(1, max_consumers)
        self._lock = lock
        self._clock = clock
        self._busy = busy
        self._by_index: dict[int, Member] = {}
        self._turns = BandTurns()
        self._busy_since: dict[int, float] = {}
        """Per band, since when every member of it has been found busy."""

    def __getitem__(self, index: int) -> Member:
        return self._by_index[index]

    def get(self, index: int) -> Member | None:
        return self._by_index.get(index)

    def values(self) -> Iterator[Member]:
        return iter(list(self._by_index.values()))

    def clear(self) -> None:
        self._by_index.clear()

    def next_to_poll(self, topics: Iterable[str], tried: set[int]) -> Member | None:
        """A free member to poll now, marked polling; None when every one that may be polled
        is busy and no more may be opened. ``tried`` holds the bands this receive polled in
        vain (cleared when every band allowed now is in it)."""
        by_band: dict[int, list[str]] = {}
        for topic in topics:
            by_band.setdefault(naming.priority_band(topic), []).append(topic)
        bands = sorted(by_band, reverse=True)
        if len(bands) > 1:
            for band, band_topics in by_band.items():
                self._first_of(band, band_topics)
            with self._lock:
                bands = self._turns.order(bands, self._clock.monotonic())
            untried = [band for band in bands if band not in tried]
            if not untried:
                tried.clear()
            bands = untried or bands
        for band in bands:
            member = self._free(band, by_band[band])
            if member is not None:
                return member
        return None

    def polled(self, member: Member, *, brought: bool) -> None:
        """A poll of ``member`` ended, with records or without."""
        with self._lock:
            self._turns.polled(member.band, self._clock.monotonic(), brought=brought)

    def _first_of(self, band: int, topics: list[str]) -> None:
        with self._lock:
            if not any(m.band == band for m in self._by_index.values()):
                index = len(self._by_index)
                self._by_index[index] = self._make(index, band, topics)

    def _free(self, band: int, topics: list[str]) -> Member | None:
        with self._lock:
            member = next_to_poll(
                (m for m in self._by_index.values() if m.band == band),
                lambda m: not self._busy(m),
            )
            now = self._clock.monotonic()
            if member is None:
                if any(m.band == band for m in self._by_index.values()):
                    if len(self._by_index) >= self._max:
                        return None
                    if now - self._busy_since.setdefault(band, now) < OPEN_AFTER_S:
                        return None  # the receive waits for a member to be free first
                index = len(self._by_index)
                member = self._by_index[index] = self._make(index, band, topics)
            self._busy_since.pop(band, None)
            member.polling = True
            member.last_polled = now
            return member


class _Polled(Protocol):
    @property
    def last_polled(self) -> float: ...


M = TypeVar("M", bound=_Polled)


def next_to_poll(members: Iterable[M], free: Callable[[M], bool]) -> M | None:
    """The free member polled longest ago."""
    return min((m for m in members if free(m)), key=lambda m: m.last_polled, default=None)
