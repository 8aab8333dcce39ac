"""What Kafka knows about topics and groups, asked the way every part of the adapter does.

- :class:`PartitionCounts`: topics' partition counts, cached, never creating a topic by asking
  (:class:`MissingTopic` when one is required and absent);
- :func:`committed_offsets`: a group's committed offsets;
- :func:`require_visible`: the topics a command needs, or a clear error naming the permission.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError
from adapter.kafka import clients
from adapter.kafka.retry import keep_trying


def require_visible(
    conf: Mapping[str, Any], topics: Sequence[str], operation: str, timeout_s: float
) -> None:
    """Every Kafka topic of ``topics`` is visible to the principal of ``conf``; otherwise an
    ``AdapterError`` naming them and the permission ``operation`` the principal needs (a topic
    the principal may not describe is left out of the metadata, as a missing one is).
    :class:`KafkaUnavailableError` when Kafka cannot be reached within ``timeout_s``."""
    metadata = clients.reach(conf, timeout_s)
    hidden = [t for t in topics if t not in metadata.topics or metadata.topics[t].error is not None]
    if hidden:
        names = ", ".join(naming.decode(t) for t in hidden)
        raise AdapterError(
            f"cannot see topic {names}: the principal is not authorised to {operation} it, or it "
            "does not exist (ACLs: docs/production.md; `rmq-adapter topics init` creates the "
            "system topics)"
        )


class MissingTopic(AdapterError):
    """The topic does not exist (or has no partitions)."""

    kind = "missing topic"


@dataclass(eq=False)
class PartitionCounts:
    """Partition counts of topics, cached: a count for ``ttl_s``, an absence for ``miss_ttl_s``.

    Asks for the list of all topics, never for one topic by name: a metadata request naming a
    missing topic makes a broker with ``auto.create.topics.enable`` create it, with the
    broker's default layout. :meth:`count` with ``create=True`` asks by name on purpose, to get
    RocketMQ's ``autoCreateTopicEnable`` behaviour for a producer's own topic."""

    list_topics: Callable[..., Any]
    """A client's ``list_topics``."""
    timeout_s: float
    ttl_s: float = 30.0
    miss_ttl_s: float = 1.0
    clock: Clock = SYSTEM_CLOCK
    _cache: dict[str, tuple[float, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, topic: str, *, create: bool = False) -> int:
        """``topic``'s partition count (a Kafka name); 0 when it does not exist."""
        now = self.clock.monotonic()
        cached = self._cache.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        if create:
            metadata = self.list_topics(topic, timeout=self.timeout_s)
        else:
            metadata = self.list_topics(timeout=self.timeout_s)
        found = metadata.topics.get(topic)
        count = len(found.partitions) if found is not None and found.error is None else 0
        with self._lock:
            self._cache[topic] = (now + (self.ttl_s if count else self.miss_ttl_s), count)
        return count

    def cached(self, topic: str) -> int:
        """``topic``'s partition count when a fresh one is cached, else 0; never asks Kafka (for
        an event loop, which must not block)."""
        cached = self._cache.get(topic)
        return cached[1] if cached is not None and cached[0] > self.clock.monotonic() else 0

    def require(self, topic: str, *, create: bool = False, wait_s: float = 0.0) -> int:
        """``topic``'s partition count, waiting up to ``wait_s`` for a topic created a moment
        ago to appear; :class:`MissingTopic` otherwise."""

        def lookup() -> int:
            count = self.count(topic, create=create)
            if not count:
                raise MissingTopic(
                    f"topic {naming.decode(topic)!r} does not exist", topic=naming.decode(topic)
                )
            return count

        count = self.count(topic, create=create)
        if count:
            return count  # the usual case, on every send: no retry machinery
        return keep_trying(
            lookup, when=lambda exc: isinstance(exc, MissingTopic), every_s=0.1, for_s=wait_s
        )

    def forget(self, topic: str) -> None:
        with self._lock:
            self._cache.pop(topic, None)


def _coordinator_busy(exc: BaseException) -> bool:
    """The group coordinator is loading or moving (or the request timed out): ask again."""
    if not isinstance(exc, KafkaException):
        return False
    error: KafkaError = exc.args[0]
    return error.retriable() or error.code() in _COORDINATOR_BUSY


_COORDINATOR_BUSY = frozenset(
    {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TIMED_OUT}
)


def committed_offsets(
    conf: Mapping[str, Any], group: str, partitions: list[TopicPartition], timeout_s: float = 30
) -> list[int]:
    """The group's committed offsets (-1001 where none), asking again for up to ``timeout_s``
    while its coordinator is busy. A consumer handle of that group asks, not the admin API:
    librdkafka's ListConsumerGroupOffsets crashed the process here when the group coordinator
    was still loading."""

    def ask() -> list[int]:
        asker = clients.consumer({**conf, "group.id": group, "enable.auto.commit": False})
        try:
            return [tp.offset for tp in asker.committed(partitions, timeout=timeout_s)]
        finally:
            asker.close()

    return keep_trying(ask, when=_coordinator_busy, every_s=0.5, for_s=timeout_s)
