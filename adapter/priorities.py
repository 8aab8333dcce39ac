"""Priority messages (RocketMQ 5.4, RIP-80) on Kafka: which band a priority goes to, and which
bands a consumer may fetch while others wait. Pure; the producer and the push consumer's poll
loop are its shells.

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
random share, so a lower band waits at most that long while higher ones stay busy.

Known gaps: the gate sees one consumer's assigned partitions, as RocketMQ's order holds within
one broker; messages already handed to the listener's threads are not taken back.
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
