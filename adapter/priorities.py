"""Priority messages (RocketMQ 5.4, RIP-80) on Kafka: which band a priority goes to, and which
bands a consumer may fetch while others wait. Pure; the producer and the 5.x consumers' share
pool (:mod:`adapter.v5.share_members`) are its shells.

RocketMQ maps a priority to a queue of a topic made for priorities (one queue per level), and a
pop on such a topic reads the queues highest priority first for ``priorityFactor`` per cent of
pops and from a random queue for the rest, so a lower priority keeps a share and is not starved
(``PopMessageProcessor``); the order holds on one broker only.

Here a band is a Kafka topic (:func:`adapter.naming.priority_topic`): band 0 is the topic
itself, band ``k`` its ``.priority-<k>`` topic, and the bands that exist are the priorities the
topic was made for. :func:`band_for` sends a priority to the highest band not above it (so a
topic made for bands 0-3 takes priority 9 in band 3, as RocketMQ's last queue takes the
priorities above its queue count). :class:`BandGate` lets a consumer fetch the highest band
that holds records and those above it, and holds the lower ones back; a band held for
``max_hold_s`` is let through for ``grace_s``, then held again: the deadline replaces RocketMQ's
random share, so a lower band waits at most that long while higher ones stay busy. A share
group's consumer has no end offsets to tell which bands hold records, so :class:`BandTurns`
judges it from what each band's polls brought.

Known gaps: the order holds per consumer, as RocketMQ's holds within one broker; messages
already received (a push consumer's cache) are not taken back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

MAX_HOLD_S = 10.0
"""How long a lower band waits while higher bands keep records coming."""
GRACE_S = 1.0
"""How long a band held ``MAX_HOLD_S`` is then let through."""


def band_for(priority: int | None, bands: Collection[int]) -> int:
    """The band of a message with ``priority`` on a topic made for ``bands`` (above 0): the
    highest one not above ``priority``; 0 for none or no priority."""
    if not priority:
        return 0
    fitting = [band for band in bands if 0 < band <= priority]
    return max(fitting, default=0)


@dataclass
class BandGate:
    """The bands of one topic a consumer may fetch now, from which of them hold records."""

    max_hold_s: float = MAX_HOLD_S
    grace_s: float = GRACE_S
    _held_since: dict[int, float] = field(default_factory=dict)
    _grace_until: dict[int, float] = field(default_factory=dict)

    def open_bands(self, backlog: Mapping[int, bool], now: float) -> set[int]:
        """The bands of ``backlog`` (band -> has records waiting) that may be fetched at
        ``now`` (monotonic seconds): every band from the highest one with records up, and a
        lower band when it has waited ``max_hold_s`` (then for ``grace_s``)."""
        waiting = [band for band, has in backlog.items() if has]
        top = max(waiting, default=None)
        opened: set[int] = set()
        for band in backlog:
            if top is None or band >= top:
                self._held_since.pop(band, None)
                self._grace_until.pop(band, None)
                opened.add(band)
            elif self._grace_until.get(band, -1.0) > now:
                opened.add(band)
            else:
                since = self._held_since.setdefault(band, now)
                if now - since >= self.max_hold_s:
                    self._grace_until[band] = now + self.grace_s
                    self._held_since[band] = now + self.grace_s
                    opened.add(band)
        return opened


JOIN_S = 6.0
"""How long a band whose polls brought nothing yet counts as holding records: a share consumer
gets its partitions a few seconds after it joins (one heartbeat, 5 s on Kafka's defaults), so
until then its empty polls say nothing of its band."""
LINGER_S = 0.5
"""How long a band that brought records counts as holding more: between one batch's ack and
the next fetch a poll may come back empty while the band still has a backlog."""


@dataclass
class BandTurns:
    """The order in which a share-group consumer polls the bands it subscribed (the highest
    first), from what each band's polls brought; lower bands wait while a higher one may hold
    records, as :class:`BandGate` decides. A consumer has no end offsets of a share group's
    partitions to go by, so "may hold records" is: not polled yet, brought records within
    ``linger_s``, or still joining (nothing brought yet, first polled within ``join_s``)."""

    join_s: float = JOIN_S
    linger_s: float = LINGER_S
    gate: BandGate = field(default_factory=BandGate)
    _first_polled: dict[int, float] = field(default_factory=dict)
    _brought_at: dict[int, float] = field(default_factory=dict)

    def order(self, bands: Collection[int], now: float) -> list[int]:
        """The bands that may be polled at ``now``, highest first."""
        backlog = {band: self._may_hold(band, now) for band in bands}
        return sorted(self.gate.open_bands(backlog, now), reverse=True)

    def polled(self, band: int, now: float, *, brought: bool) -> None:
        """A poll of ``band`` ended at ``now``, with records or without."""
        self._first_polled.setdefault(band, now)
        if brought:
            self._brought_at[band] = now

    def _may_hold(self, band: int, now: float) -> bool:
        first = self._first_polled.get(band)
        if first is None:
            return True
        brought = self._brought_at.get(band)
        if brought is None:
            return now - first < self.join_s
        return now - brought < self.linger_s
