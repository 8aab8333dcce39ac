"""The push consumer's hold on lower priority bands: which assigned partitions wait while a
higher band of their topic has records this consumer has not fetched yet.

The shell of :class:`adapter.priorities.BandGate` on a Kafka consumer. A band's partition has
records waiting when its end offset is past the consumer's position: the position is the next
offset ``consume`` hands out (before the first record, the committed offset, or the earliest
retained one, asked once); the end is the largest of the high watermarks seen, from fetch
responses for the partitions being fetched and asked of Kafka for a held one whose band is
next in line (a held partition is not fetched, so what librdkafka caches of it is stale).
Records prefetched by librdkafka count as waiting until ``consume`` hands them out; pausing a
partition drops them, and resuming fetches again from the position.

Known gaps: a group whose new members start from the latest record would see a backlog a
moment too long (the adapter's groups start from the earliest).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from adapter import naming
from adapter.clock import Clock
from adapter.priorities import BandGate

log = logging.getLogger(__name__)

Key = tuple[str, int]
_ASK_TIMEOUT_S = 2.0


@dataclass
class _Partition:
    family: str
    band: int
    start: int | None = None
    """Where consuming starts when nothing was handed out yet (asked once)."""
    end: int = -1
    """The largest end offset seen."""


class PriorityHold:
    """Holds lower bands back, per topic made for priorities; ``bands`` maps each subscribed
    Kafka topic of such a topic to (the topic's Kafka name, its band)."""

    def __init__(
        self,
        client: Consumer,
        bands: Mapping[str, tuple[str, int]],
        clock: Clock,
        gate: type[BandGate] = BandGate,
    ) -> None:
        self._client = client
        self._bands = dict(bands)
        self._clock = clock
        self._gates = {family: gate() for family, _ in self._bands.values()}
        self._partitions: dict[Key, _Partition] = {}
        self.held: set[Key] = set()

    def assigned(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Track newly assigned partitions; those to hold before their first fetch (all but
        the highest band of each topic, until :meth:`update` knows better)."""
        for tp in partitions:
            found = self._bands.get(tp.topic)
            if found is not None:
                self._partitions[(tp.topic, tp.partition)] = _Partition(*found)
        tops: dict[str, int] = {}
        for part in self._partitions.values():
            tops[part.family] = max(tops.get(part.family, 0), part.band)
        hold = [
            tp
            for tp in partitions
            if (tp.topic, tp.partition) in self._partitions
            and self._partitions[(tp.topic, tp.partition)].band < tops[self._bands[tp.topic][0]]
        ]
        self.held.update((tp.topic, tp.partition) for tp in hold)
        return hold

    def released(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._partitions.pop((tp.topic, tp.partition), None)
            self.held.discard((tp.topic, tp.partition))

    def update(self) -> None:
        """Decide again which partitions are held (:attr:`held`)."""
        now = self._clock.monotonic()
        families: dict[str, dict[int, list[Key]]] = {}
        for key, part in self._partitions.items():
            families.setdefault(part.family, {}).setdefault(part.band, []).append(key)
        held: set[Key] = set()
        for family, bands in families.items():
            backlog: dict[int, bool] = {}
            for band in sorted(bands, reverse=True):
                if any(backlog.values()):
                    backlog[band] = True  # below a band with records: not asked
                    continue
                backlog[band] = any(self._waiting(key) for key in bands[band])
            opened = self._gates[family].open_bands(backlog, now)
            for band, keys in bands.items():
                if band not in opened:
                    held.update(keys)
        for key in self.held - held:
            log.debug("priority band %s[%d] resumes", naming.decode(key[0]), key[1])
        self.held = held

    def _waiting(self, key: Key) -> bool:
        """Whether the partition has records ``consume`` has not handed out yet."""
        part = self._partitions[key]
        tp = TopicPartition(*key)
        try:
            [pos] = self._client.position([tp])
            position = pos.offset if pos.offset >= 0 else self._start(part, tp)
            _, cached_end = self._client.get_watermark_offsets(tp, cached=True)
            part.end = max(part.end, cached_end)
            if key in self.held or part.end < 0:
                _, end = self._client.get_watermark_offsets(tp, _ASK_TIMEOUT_S, cached=False)
                part.end = max(part.end, end)
        except KafkaException as exc:
            log.warning("priority band %s[%d]: %s", naming.decode(key[0]), key[1], exc)
            return True  # unknown: keep lower bands waiting a little longer
        return part.end > position

    def _start(self, part: _Partition, tp: TopicPartition) -> int:
        if part.start is None:
            [committed] = self._client.committed([tp], timeout=_ASK_TIMEOUT_S)
            if committed.offset >= 0:
                part.start = committed.offset
            else:
                low, _ = self._client.get_watermark_offsets(tp, _ASK_TIMEOUT_S, cached=False)
                part.start = low
        return part.start
