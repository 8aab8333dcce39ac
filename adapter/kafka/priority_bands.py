"""The priority bands of topics made for priorities, as Kafka's list of topics shows them.

A topic made for priorities has a Kafka topic per band above 0 (:func:`adapter.naming.
priority_topic`); :class:`PriorityBands` finds them, caches them per topic, and gives the Kafka
topic a priority goes to (:func:`adapter.priorities.band_for`). It asks for the list of all
topics, never for one by name, so no band is created by asking.

Known gaps: a band created while a producer runs is used once the cache expires (``ttl_s``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.priorities import band_for


@dataclass(eq=False)
class PriorityBands:
    """Band number -> Kafka topic of topics made for priorities, cached for ``ttl_s`` (a
    topic without bands for ``miss_ttl_s``: its bands may be being created)."""

    list_topics: Callable[..., Any]
    """A client's ``list_topics``."""
    timeout_s: float
    ttl_s: float = 30.0
    miss_ttl_s: float = 1.0
    clock: Clock = SYSTEM_CLOCK
    _cache: dict[str, tuple[float, dict[int, str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, kafka_topic: str) -> dict[int, str]:
        """The bands above 0 of ``kafka_topic`` (a Kafka name); empty for a plain topic."""
        now = self.clock.monotonic()
        cached = self._cache.get(kafka_topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        metadata = self.list_topics(timeout=self.timeout_s)
        names = [name for name, info in metadata.topics.items() if info.error is None]
        bands = naming.priority_bands(kafka_topic, names)
        with self._lock:
            self._cache[kafka_topic] = (now + (self.ttl_s if bands else self.miss_ttl_s), bands)
        return bands

    def route(self, kafka_topic: str, priority: int | None) -> str:
        """The Kafka topic a message of ``priority`` to ``kafka_topic`` goes to: its band's
        (``kafka_topic`` itself for band 0, a plain topic, or no priority)."""
        if not priority:
            return kafka_topic
        bands = self.of(kafka_topic)
        return bands.get(band_for(priority, bands), kafka_topic)
