"""The Kafka side of the 5.x ``SimpleConsumer``: its share group's settings and its members.

Reproduces what a RocketMQ 5.x proxy keeps per consumer group for pop consumption, on a Kafka
share group (KIP-932):

- :func:`configure_group` sets the group's configs (``incremental_alter_configs`` on a GROUP
  resource): ``share.auto.offset.reset=earliest`` (a new group starts with the retained
  messages, as the 2.0 consumer does; Kafka's default is *latest*),
  ``share.isolation.level=read_committed`` (only committed transactional messages; librdkafka
  has no client-side isolation level for share consumers), ``share.record.lock.duration.ms``
  (the ceiling of every invisible duration) and ``share.delivery.count.limit``, the broker's
  most (:func:`attempts_and_limit`: the client counts only the deliveries it hands out, sees
  the delivery past the last attempt and moves it to ``%DLQ%<group>`` before the broker would
  archive it, with one more delivery to spare if it dies meanwhile);
- :func:`broker_limits` reads the broker's bounds on those two (``group.share.max.*``);
- :class:`Member` is one ``confluent_kafka.ShareConsumer`` in explicit acknowledgement mode.
  librdkafka refuses a poll while a record of the previous one is unacknowledged, so a member
  polls only when it holds nothing, and the consumer keeps a pool of them. Every call to a
  member goes through its lock (a ``ShareConsumer`` is not thread-safe). ``settle``
  acknowledges (ACCEPT or RELEASE) and commits before it returns, and reports per partition
  what Kafka refused and why; the acknowledgements of threads that settle at the same time
  share one commit (group commit, :mod:`adapter.v5.group_commit`).

- :func:`group_in_the_way` finds a Kafka consumer group of the same name (a 2.0
  ``PushConsumer``'s): Kafka group ids are one namespace, and a share group cannot take it.

Known gaps: the group's configs are shared by every consumer of the group; the last one to
start sets them. Setting them needs the ALTER_CONFIGS permission on the group. A RocketMQ group
can mix push and simple consumers; on Kafka a 2.0 ``PushConsumer`` group and a
``SimpleConsumer`` group need different names.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from confluent_kafka import AcknowledgeType, ConsumerGroupType, KafkaError, KafkaException
from confluent_kafka import Message as KafkaRecord
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from adapter.clock import Clock
from adapter.config import KafkaSettings
from adapter.kafka import clients
from adapter.logs import RepeatLimiter, shape
from adapter.v5.group_commit import Key, Refusal, answer_group_commit, key_of
from adapter.v5.invisibility import FetchWindow

__all__ = [
    "BrokerLimits",
    "Member",
    "Verdict",
    "attempts_and_limit",
    "broker_limits",
    "configure_group",
    "group_in_the_way",
    "judge_delivery",
]

log = logging.getLogger(__name__)

FETCH_WAIT_S = 0.5
"""The longest a share fetch waits at the broker for records (``fetch.wait.max.ms``)."""
POLL_RECORDS = 32
"""The most records a poll asks Kafka for (``max.poll.records``; the 5.x push consumer's
receive batch). Kafka 4.3 acquires whole record batches, so a fetch may bring more."""
ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE


@dataclass(frozen=True, slots=True)
class BrokerLimits:
    """The broker's bounds on a share group's lock duration and delivery count limit
    (Kafka 4.3's defaults unless the broker says otherwise)."""

    min_lock_ms: int = 15_000
    max_lock_ms: int = 60_000
    max_delivery_count: int = 10


def broker_limits(admin: AdminClient, timeout_s: float) -> BrokerLimits:
    """The bounds of the first broker the cluster lists; Kafka's defaults when they cannot be
    read (no DescribeConfigs permission), with a warning."""
    names = {
        "group.share.min.record.lock.duration.ms": "min_lock_ms",
        "group.share.max.record.lock.duration.ms": "max_lock_ms",
        "group.share.max.delivery.count.limit": "max_delivery_count",
    }
    try:
        broker = min(admin.list_topics(timeout=timeout_s).brokers)
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        found = admin.describe_configs([resource])[resource].result(timeout=timeout_s)
        values = {
            field: int(found[name].value)
            for name, field in names.items()
            if name in found and found[name].value
        }
    except (KafkaException, ValueError, TimeoutError) as exc:
        log.warning("could not read the broker's share group limits (%s); assuming Kafka's", exc)
        return BrokerLimits()
    return BrokerLimits(**values)


ROCKETMQ_MAX_ATTEMPTS = 17
"""A 5.x group's default: ``retryMaxTimes`` (16) + 1."""


def attempts_and_limit(broker_max_count: int, asked: int | None) -> tuple[int, int]:
    """The group's max attempts and the share group's ``share.delivery.count.limit``.

    The limit is the most the broker allows: Kafka counts every fetch of a record, also the
    fetches the client releases unseen (:func:`judge_delivery` does not count those), so the
    limit needs room beyond the attempts. The attempts leave at least two deliveries below
    the limit where the broker allows it: the first is moved to the dead-letter topic, the
    second is there in case the consumer died while moving it (past the limit the broker
    archives a record, which would lose it). Without ``asked``: RocketMQ's 17, or as many as
    the broker allows with the two spare. ``asked`` may take the second spare delivery
    (warned); more is refused (``ValueError``).
    """
    if asked is None:
        return max(1, min(ROCKETMQ_MAX_ATTEMPTS, broker_max_count - 2)), broker_max_count
    if asked < 1:
        raise ValueError(f"max_attempts must be 1 or more, got {asked}")
    if asked + 1 > broker_max_count:
        raise ValueError(
            f"max_attempts {asked} is more than the broker allows: at most "
            f"{broker_max_count - 1} (group.share.max.delivery.count.limit {broker_max_count}, "
            "less one delivery to move a message to the dead-letter topic)"
        )
    return asked, broker_max_count


def choose_attempts(group: str, broker_max_count: int, asked: int | None) -> tuple[int, int]:
    """:func:`attempts_and_limit` for ``group``, logged where it falls short of RocketMQ's
    (``ValueError`` for more attempts than the broker allows)."""
    attempts, limit = attempts_and_limit(broker_max_count, asked)
    if asked is None and attempts < ROCKETMQ_MAX_ATTEMPTS:
        log.warning(
            "group %s: max attempts %d, not RocketMQ's %d: the broker allows share groups "
            "%d deliveries (group.share.max.delivery.count.limit), and two are kept to "
            "move a message to the dead-letter topic",
            group, attempts, ROCKETMQ_MAX_ATTEMPTS, broker_max_count,
        )  # fmt: skip
    elif limit < attempts + 2:
        log.warning(
            "group %s: max attempts %d leave no spare delivery: a consumer that dies while "
            "moving a message to the dead-letter topic loses it to the broker's limit",
            group, attempts,
        )  # fmt: skip
    return attempts, limit


class Verdict(Enum):
    """What a fetched record is for (:func:`judge_delivery`)."""

    DELIVER = "deliver"
    LAST = "last"
    """Handed out, but moved to the dead-letter topic instead of going back to the group:
    Kafka's delivery count limit allows one fetch more, kept in case the consumer dies."""
    DEAD = "dead"
    """Moved to the dead-letter topic unseen."""


def judge_delivery(
    *, kafka_count: int, unseen: int, max_attempts: int, limit: int
) -> tuple[int, Verdict]:
    """This fetch's attempt and what to do with it. RocketMQ counts an attempt only when a
    message is delivered to the application: the fetches this consumer released unseen
    (``unseen``) are not attempts, though Kafka's delivery count (``kafka_count``) has them."""
    attempt = max(1, kafka_count - unseen)
    if attempt > max_attempts or kafka_count >= limit:
        return attempt, Verdict.DEAD
    if kafka_count >= limit - 1:
        return attempt, Verdict.LAST
    return attempt, Verdict.DELIVER


def group_in_the_way(admin: AdminClient, group: str, timeout_s: float) -> str | None:
    """The type of a Kafka consumer group (not a share group) already named ``group``, if
    any: a share group cannot take its name (a 2.0 ``PushConsumer``'s group, say)."""
    types = {ConsumerGroupType.CONSUMER, ConsumerGroupType.CLASSIC}
    listed = admin.list_consumer_groups(request_timeout=timeout_s, types=types)
    for found in listed.result(timeout=timeout_s).valid:
        if found.group_id == group:
            kind = getattr(found, "type", None)
            return str(getattr(kind, "name", kind)).lower()
    return None


def configure_group(
    admin: AdminClient, group: str, *, lock_ms: int, delivery_count_limit: int, timeout_s: float
) -> None:
    """Set the share group's configs (see the module's docstring); raises ``KafkaException``."""
    settings = {
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": str(lock_ms),
        "share.delivery.count.limit": str(delivery_count_limit),
    }
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in settings.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=timeout_s)
    log.info("share group %s configured: %s", group, settings, extra={"group": group})


@dataclass(eq=False)
class _Acks:
    """One caller's acknowledgements in a group commit, and, once committed, what Kafka
    refused."""

    records: Sequence[tuple[KafkaRecord, AcknowledgeType]]
    partial: dict[Key, Refusal] = field(default_factory=dict)
    """Refused before the commit: librdkafka would not take the acknowledgement."""
    refused: dict[Key, Refusal] | None = None


class Member:
    """One share consumer of the pool: polled only when it holds nothing."""

    def __init__(
        self,
        index: int,
        kafka: KafkaSettings,
        group: str,
        client_id: str,
        topics: Sequence[str],
        *,
        lock_ms: int,
        clock: Clock,
        band: int = 0,
    ) -> None:
        self.index = index
        self.band = band
        """The priority band whose Kafka topics it consumes (0: the topics themselves)."""
        self.polling = False
        """Set and cleared by the consumer, under its own lock."""
        self.last_polled = 0.0
        """When the consumer last picked it to poll (monotonic; under the consumer's lock)."""
        self.fatal: KafkaError | None = None
        """librdkafka's fatal error, after which this share consumer is of no use."""
        self._lock = threading.Lock()
        self._acks = threading.Condition()
        self._waiting: list[_Acks] = []
        self._settling = False
        self._clock = clock
        conf: dict[str, Any] = {
            "group.id": group,
            "client.id": f"{client_id}#{index}",
            "share.acknowledgement.mode": "explicit",
            "fetch.wait.max.ms": int(FETCH_WAIT_S * 1000),
            "max.poll.records": POLL_RECORDS,
            # A member holding records does not poll until they are settled (at most a lock).
            "max.poll.interval.ms": max(300_000, 2 * lock_ms),
        }
        self._client = clients.share_consumer(kafka.librdkafka(conf), announce=True)
        self._topics = tuple(topics)
        self._client.subscribe(list(self._topics))
        self._window = FetchWindow(clock.monotonic(), FETCH_WAIT_S)
        self._errors = RepeatLimiter(30.0, clock.monotonic)

    def poll(self, timeout_s: float, topics: Sequence[str]) -> tuple[list[KafkaRecord], float]:
        """The records of one poll, and a moment before which none of them was locked (see
        :class:`~adapter.v5.invisibility.FetchWindow`)."""
        with self._lock:
            started = self._clock.monotonic()
            if tuple(topics) != self._topics:
                self._topics = tuple(topics)
                self._client.subscribe(list(self._topics))
                self._window.subscribed(started)
            locked_since = self._window.poll_started(started)
            batch: Iterable[KafkaRecord] = ()
            try:
                batch = list(self._client.poll(timeout_s))
            except KafkaException as exc:
                self._report(exc.args[0] if exc.args else KafkaError(KafkaError._FAIL))
            except RuntimeError as exc:  # librdkafka's IllegalStateException: a bug of ours
                log.error("share consumer %d refused a poll: %s", self.index, exc)
            records = []
            for record in batch:
                error = record.error()
                if error is None:
                    records.append(record)
                else:
                    self._report(error)
            self._window.poll_ended(started, bool(records))
        return records, locked_since

    def settle(
        self, records: Sequence[tuple[KafkaRecord, AcknowledgeType]], timeout_s: float
    ) -> dict[Key, Refusal]:
        """Acknowledge ``records`` and commit; what Kafka refused, per (topic, partition)
        (:mod:`adapter.v5.group_commit`).

        Group commit: while one caller's commit is in flight, the acknowledgements of others
        wait, and the next of them commits them all in one ``commit_sync``; each caller still
        returns only once Kafka answered for its own records."""
        if not records:
            return {}
        mine = _Acks(records)
        with self._acks:
            self._waiting.append(mine)
            while mine.refused is None and self._settling:
                self._acks.wait()
            if mine.refused is not None:
                return mine.refused
            self._settling = True
            group, self._waiting = self._waiting, []
        try:
            self._settle_group(group, timeout_s)
        finally:
            with self._acks:
                self._settling = False
                for acks in group:
                    if acks.refused is None:  # the group commit itself raised
                        failure = Refusal(KafkaError(KafkaError._FAIL, "not committed"))
                        acks.refused = {key_of(r): failure for r, _ in acks.records}
                self._acks.notify_all()
        return mine.refused if mine.refused is not None else {}

    def _settle_group(self, group: list[_Acks], timeout_s: float) -> None:
        sent: list[list[tuple[KafkaRecord, AcknowledgeType]]] = []
        with self._lock:
            self._window.acknowledged(self._clock.monotonic())
            for acks in group:
                taken = []
                for record, kind in acks.records:
                    try:
                        self._client.acknowledge(record, kind)
                        taken.append((record, kind))
                    except (KafkaException, RuntimeError, ValueError) as exc:
                        # No longer in flight (this member left the group meanwhile).
                        failure = KafkaError(KafkaError._STATE, str(exc))
                        acks.partial[key_of(record)] = Refusal(failure)
                sent.append(taken)
            try:
                result = self._client.commit_sync(timeout_s)
            except KafkaException as exc:
                for acks in group:
                    acks.refused = {key_of(r): Refusal.of(exc) for r, _kind in acks.records}
                return
        for acks, answer in zip(group, answer_group_commit(sent, result), strict=True):
            acks.refused = {**answer, **acks.partial}

    def close(self) -> None:
        with self._lock:
            try:
                self._client.close()
            except (KafkaException, RuntimeError) as exc:
                log.warning("share consumer %d close failed: %s", self.index, exc)

    def _report(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal = error
        held = self._errors.admit(shape(error.str()))
        if held is not None:
            more = f" ({held} more like it in the last 30 s)" if held else ""
            log.warning("share consumer %d: %s%s", self.index, error.str(), more)
