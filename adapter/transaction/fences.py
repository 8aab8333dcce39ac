"""Which real topics bound their appends in time, so that a producer may commit to them directly.

A transactional producer commits directly (:mod:`adapter.transaction.direct`) only to a topic
whose configs make a fence: CreateTime and a ``message.timestamp.before.max.ms`` of at most
``DIRECT_FENCE_MAX_MS``. The replication allowance is the brokers' ``replica.lag.time.max.ms``
where the topic's partitions have more than one replica, and none where they have one (a
leader alone makes a record readable as it appends it). Read with the admin client and kept for
a minute; a topic whose configs cannot be read (no DESCRIBE_CONFIGS permission, Kafka away) is
not fenced, and its COMMITs take the group commit. :func:`fence_topic` gives an existing topic
the fence (``rmq-adapter topics create --direct-commit``).

Known gaps: a fence relaxed while half messages are pending (a larger before.max set on the
topic) lets their direct appends land later than the half messages say; raise it only with no
producer running.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from adapter import naming
from adapter.clock import Clock
from adapter.exceptions import KafkaUnavailableError, TopicLayoutError
from adapter.kafka.topics import DIRECT_COMMIT, describe_configs, set_topic_configs
from adapter.logs import RepeatLimiter
from adapter.transaction.direct import Fence

__all__ = ["TopicFences", "fence_topic"]

log = logging.getLogger(__name__)

LAG = "replica.lag.time.max.ms"
KEEP_S = 60.0
"""How long a topic's fence (or the lack of one) is kept before it is read again."""


class TopicFences:
    """Each real topic's :class:`Fence`, or None, read once a minute (thread-safe)."""

    def __init__(self, admin: Callable[[], AdminClient], timeout_s: float, clock: Clock) -> None:
        self._admin_factory = admin
        self._admin: AdminClient | None = None
        self._timeout_s = timeout_s
        self._clock = clock
        self._known: dict[str, tuple[float, Fence | None]] = {}
        self._lock = threading.Lock()
        self._errors = RepeatLimiter(60.0, clock.monotonic)

    def knows(self, kafka_topic: str) -> bool:
        """Whether :meth:`of` ``kafka_topic`` answers from what it knows, asking Kafka nothing
        (without the lock, which :meth:`of` holds while it asks: for an event loop)."""
        return self._fresh(kafka_topic, self._clock.monotonic()) is not None

    def of(self, kafka_topic: str) -> Fence | None:
        """``kafka_topic``'s fence; None when its appends are not bounded in time."""
        now = self._clock.monotonic()
        known = self._fresh(kafka_topic, now)  # first without the lock, held while Kafka is asked
        if known is not None:
            return known[1]
        with self._lock:
            known = self._fresh(kafka_topic, now)
            if known is not None:
                return known[1]
            try:
                fence = self._read(kafka_topic)
            except (KafkaException, TimeoutError, ValueError) as exc:
                if self._errors.admit("describe") is not None:
                    log.warning(
                        "cannot read the configs of topic %s (%s); its transactional messages "
                        "commit through Kafka transactions",
                        kafka_topic,
                        exc,
                    )
                fence = None
            self._known[kafka_topic] = (now, fence)
            return fence

    def _fresh(self, kafka_topic: str, now: float) -> tuple[float, Fence | None] | None:
        """What is known of ``kafka_topic`` (when it was read, its fence), if read lately."""
        known = self._known.get(kafka_topic)
        return known if known is not None and now - known[0] < KEEP_S else None

    def _read(self, kafka_topic: str) -> Fence | None:
        if self._admin is None:
            self._admin = self._admin_factory()
        admin, timeout_s = self._admin, self._timeout_s
        configs = describe_configs(admin, [kafka_topic], timeout_s)[kafka_topic]
        if Fence.of(configs, {}) is None:
            return None
        metadata = admin.list_topics(kafka_topic, timeout=timeout_s)
        partitions = metadata.topics[kafka_topic].partitions.values()
        if all(len(p.replicas) <= 1 for p in partitions):
            return Fence.of(configs, {LAG: "0"})  # a leader alone: readable once appended
        broker = ConfigResource(ResourceType.BROKER, str(min(metadata.brokers)))
        found = admin.describe_configs([broker])[broker].result(timeout=timeout_s)
        lag = found.get(LAG)
        return Fence.of(configs, {} if lag is None or lag.value is None else {LAG: lag.value})


def fence_topic(admin: AdminClient, kafka_topic: str, timeout_s: float) -> bool:
    """Give the existing topic ``kafka_topic`` the fence of :data:`DIRECT_COMMIT` unless it has
    one (:meth:`Fence.of`): whether this call changed it. A fence is never loosened (half
    messages pending on it count on it).

    Raises :class:`TopicLayoutError` for a topic stamped at append (LogAppendTime), whose
    consumers read the broker's times: changing that is the operator's choice, not ours."""
    try:
        configs = describe_configs(admin, [kafka_topic], timeout_s)[kafka_topic]
    except concurrent.futures.TimeoutError:
        raise KafkaUnavailableError(
            f"Kafka did not describe {naming.decode(kafka_topic)} within {timeout_s:g} s"
        ) from None
    stamps = configs.get("message.timestamp.type", "CreateTime")
    if stamps != "CreateTime":
        raise TopicLayoutError(
            f"{naming.decode(kafka_topic)} is stamped at append (message.timestamp.type="
            f"{stamps}); direct commits need CreateTime: not changed",
            topic=naming.decode(kafka_topic),
        )
    if Fence.of(configs, {}) is not None:
        return False
    set_topic_configs(admin, kafka_topic, DIRECT_COMMIT, timeout_s)
    return True
