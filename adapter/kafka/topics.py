"""The system topic layout, and ``rmq-adapter topics init`` that creates it.

Reproduces the system topics a RocketMQ broker creates at start (``TopicConfigManager``):
the transaction half, op and discard topics and ``SCHEDULE_TOPIC_XXXX`` with one queue per
delay level. On Kafka, three rules must hold, and ``init`` refuses to go on when existing
topics break them:

1. ``RMQ_SYS_TRANS_HALF_TOPIC``, ``RMQ_SYS_TRANS_END_TOPIC`` and
   ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` have the same partition count (partition p of the three
   belongs to one coordinator at a time).
2. ``SCHEDULE_TOPIC_XXXX`` has one partition per delay level (partition = level - 1), then one
   per fine hop of timer messages (:mod:`adapter.hops`). A topic of an earlier release, with
   the levels only, is given the fine hops' partitions by ``init``.
3. ``SCHEDULE_TOPIC_XXXX`` stamps records with the broker's clock
   (``message.timestamp.type=LogAppendTime``): due time = store time + level delay.

Replication (:func:`replication_for`): on a cluster of three brokers or more the topics get
replication factor 3 and ``min.insync.replicas`` 2, and a lower factor is refused unless asked
for; on one or two brokers, factor 1. RocketMQ's equivalent is its master/slave layout.

Known gaps: RocketMQ uses one half queue; we use H (default 8) so coordinators scale out.
The layout is fixed at creation: changing H later needs a migration, which is not provided.
The replication of topics that exist already is not checked or changed.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from adapter import naming
from adapter.delay import DelayLevels
from adapter.exceptions import KafkaUnavailableError, TopicLayoutError
from adapter.hops import HopTable
from adapter.kafka import clients
from adapter.kafka.metadata import PartitionCounts

DEFAULT_HALF_PARTITIONS = 8
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
BEFORE_MAX = "message.timestamp.before.max.ms"
"""The topic config that bounds how far before its leader's clock a record may be stamped."""
DIRECT_COMMIT = {"message.timestamp.type": "CreateTime", BEFORE_MAX: "5000"}
"""A real topic's configs for direct commits (:mod:`adapter.transaction.direct`): a record
stamped more than 5 s before the leader's clock is refused."""
COMPACTED = {"cleanup.policy": "compact"}
RECALLS = {
    **COMPACTED,
    # markers (tombstones) stay a day; nothing is compacted within an hour of being written;
    # hourly segments, so that compaction can reach them (a forwarder reads the topic at start)
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "3600000",
    "segment.ms": "3600000",
}
CO_PARTITIONED = (naming.TRANS_HALF_TOPIC, naming.TRANS_END_TOPIC, naming.TRANS_OP_TOPIC)


SAFE_REPLICATION = 3
"""The replication factor of the system topics on a cluster of this many brokers or more."""


@dataclass(frozen=True, slots=True)
class Replication:
    """Kafka's replication factor and ``min.insync.replicas`` of the system topics."""

    factor: int
    min_insync: int


def replication_for(
    brokers: int,
    factor: int | None = None,
    min_insync: int | None = None,
    *,
    allow_under_replicated: bool = False,
) -> Replication:
    """The replication of the system topics on a cluster of ``brokers``: the asked factor and
    minimum, or the defaults (3 and 2 on three brokers or more, else 1 and 1). Raises
    :class:`TopicLayoutError` for a layout the cluster cannot hold, and for a factor below 3 on
    three brokers or more unless ``allow_under_replicated``: one broker lost would lose
    transactions in flight and delayed messages."""
    if factor is None:
        factor = SAFE_REPLICATION if brokers >= SAFE_REPLICATION else 1
    if factor < 1:
        raise TopicLayoutError(f"the replication factor must be positive, got {factor}")
    if factor > brokers:
        raise TopicLayoutError(
            f"replication factor {factor} needs {factor} brokers; the cluster has {brokers}"
        )
    if brokers >= SAFE_REPLICATION and factor < SAFE_REPLICATION and not allow_under_replicated:
        raise TopicLayoutError(
            f"refusing replication factor {factor} on a cluster of {brokers} brokers: the system "
            "topics hold transactions in flight and delayed messages, which one lost broker "
            f"would lose; use {SAFE_REPLICATION} (the default here) or pass "
            "--allow-under-replicated"
        )
    if min_insync is None:
        min_insync = factor - 1 if factor >= SAFE_REPLICATION else 1
    if not 1 <= min_insync <= factor:
        raise TopicLayoutError(
            f"min.insync.replicas must be between 1 and the replication factor {factor}, "
            f"got {min_insync}"
        )
    return Replication(factor, min_insync)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    replication: Replication | None = None
    """None: the broker's defaults."""
    grows_from: int | None = None
    """A partition count of an earlier layout that ``init`` may grow to ``partitions``."""

    def new_topic(self) -> NewTopic:
        """The admin request that creates this topic."""
        config = dict(self.configs)
        factor = -1
        if self.replication is not None:
            factor = self.replication.factor
            config["min.insync.replicas"] = str(self.replication.min_insync)
        return NewTopic(self.name, self.partitions, factor, config=config)


def system_layout(
    half_partitions: int = DEFAULT_HALF_PARTITIONS,
    levels: DelayLevels | None = None,
    replication: Replication | None = None,
) -> list[TopicSpec]:
    if half_partitions <= 0:
        raise TopicLayoutError(f"half partitions must be positive, got {half_partitions}")
    levels = levels or DelayLevels.parse()
    return [
        *(TopicSpec(name, half_partitions, replication=replication) for name in CO_PARTITIONED),
        TopicSpec(naming.TRANS_CHECK_MAX_TIME_TOPIC, 1, replication=replication),
        TopicSpec(
            naming.SCHEDULE_TOPIC,
            HopTable.of(levels).partitions,
            LOG_APPEND_TIME,
            replication,
            grows_from=levels.max_level,
        ),
        TopicSpec(naming.POISON_TOPIC, 1, replication=replication),
        TopicSpec(naming.TIMER_RECALL_TOPIC, 1, RECALLS, replication),
        TopicSpec(naming.SCHEMAS_TOPIC, 1, COMPACTED, replication),
    ]


def check_schedule_partitions(counts: PartitionCounts, levels: DelayLevels) -> None:
    """Refuse a ``SCHEDULE_TOPIC_XXXX`` that does not have one partition per delay level and
    per fine hop, naming the table given and the one the topic was made for."""
    count = counts.count(naming.kafka_topic(naming.SCHEDULE_TOPIC))
    hops = HopTable.of(levels)
    if count == hops.partitions:
        return
    fine = len(hops.fine_ms)
    held = count - fine
    default = DelayLevels.parse()
    if count == levels.max_level:
        topic = "the levels of this table only, as a topic of an earlier release has (no fine hops)"
    elif held == default.max_level:
        topic = f"{held} levels, as the default table {table_text(default)!r} has"
    else:
        topic = f"{max(held, 0)} levels"
    raise TopicLayoutError(
        f"{naming.SCHEDULE_TOPIC} has {count} partitions but the delay level table needs "
        f"{hops.partitions}: the table {table_text(levels)!r} has {levels.max_level} levels, "
        f"and {fine} fine hops of timer messages follow them; the topic holds {topic}. Give the "
        "table the topic was made with (--delay-levels, RMQ_ADAPTER_DELAY_LEVELS); "
        "`rmq-adapter topics init` with the same table adds the fine hops to a topic of an "
        "earlier release"
    )


_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))


def table_text(levels: DelayLevels) -> str:
    """``levels`` as RocketMQ's ``messageDelayLevel`` string (``1s 5s 10s ... 2h``)."""
    words = []
    for ms in levels.delays_ms:
        unit, size = next(((u, n) for u, n in _UNITS if ms % n == 0), ("s", 1000))
        words.append(f"{ms // size}{unit}")
    return " ".join(words)


def layout_problems(
    wanted: list[TopicSpec],
    existing_partitions: Mapping[str, int],
    existing_configs: Mapping[str, Mapping[str, str]],
) -> list[str]:
    """Why the existing topics cannot serve ``wanted``; empty when they can."""
    problems = []
    present = {name: count for name, count in existing_partitions.items() if name in CO_PARTITIONED}
    if len(set(present.values())) > 1:
        counts = ", ".join(f"{name}={count}" for name, count in sorted(present.items()))
        problems.append(
            f"the transaction topics must be co-partitioned (same partition count), found {counts}"
        )
    for spec in wanted:
        count = existing_partitions.get(spec.name)
        if count is None:
            continue
        if count != spec.partitions and count != spec.grows_from:
            why = (
                "one partition per delay level and per fine hop"
                if spec.name == naming.SCHEDULE_TOPIC
                else "the layout asks for it"
            )
            problems.append(
                f"{spec.name} has {count} partitions, expected {spec.partitions} ({why})"
            )
        for key, value in spec.configs.items():
            actual = existing_configs.get(spec.name, {}).get(key)
            if actual is not None and actual != value:
                problems.append(
                    f"{spec.name} has {key}={actual}, expected {value} "
                    "(due times are counted from the broker's append time)"
                )
    return problems


def init_topics(
    conf: Mapping[str, Any], wanted: list[TopicSpec], timeout_s: float = 30.0
) -> list[str]:
    """Create the missing topics of ``wanted`` on the cluster of ``conf`` (librdkafka
    settings); return the names created.

    Raises :class:`TopicLayoutError` when existing topics break the layout rules, and
    :class:`KafkaUnavailableError` when Kafka does not answer within ``timeout_s``.
    """
    metadata = clients.reach(conf, timeout_s)
    admin = clients.admin(conf)
    partitions = {name: len(info.partitions) for name, info in metadata.topics.items()}
    names = [spec.name for spec in wanted if spec.name in partitions and spec.configs]
    configs = describe_configs(admin, names, timeout_s) if names else {}
    problems = layout_problems(wanted, partitions, configs)
    if problems:
        raise TopicLayoutError("refusing to initialise the topics:\n  " + "\n  ".join(problems))
    _grow(admin, wanted, partitions, timeout_s)
    missing = [spec for spec in wanted if spec.name not in partitions]
    if not missing:
        return []
    futures = admin.create_topics(
        [spec.new_topic() for spec in missing], operation_timeout=timeout_s
    )
    created = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s)
            created.append(name)
        except KafkaException as exc:
            if exc.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS: another init won the race
                raise TopicLayoutError(f"creating {name} failed: {exc}", topic=name) from exc
    return created


def _grow(
    admin: AdminClient, wanted: list[TopicSpec], partitions: Mapping[str, int], timeout_s: float
) -> None:
    """Give a topic of an earlier layout its new partitions (records name their partition,
    so the existing ones keep their meaning)."""
    grow = [
        NewPartitions(spec.name, spec.partitions)
        for spec in wanted
        if spec.grows_from is not None and partitions.get(spec.name) == spec.grows_from
    ]
    if not grow:
        return
    for name, future in admin.create_partitions(grow, operation_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:  # another init grew it
                raise TopicLayoutError(f"growing {name} failed: {exc}", topic=name) from exc


def describe_configs(
    admin: AdminClient, names: list[str], timeout_s: float
) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    result = {}
    for resource, future in admin.describe_configs(resources).items():
        entries = future.result(timeout=timeout_s)
        result[resource.name] = {key: entry.value for key, entry in entries.items()}
    return result


def existing_half_partitions(metadata: Any) -> int | None:
    """How many partitions ``RMQ_SYS_TRANS_HALF_TOPIC`` has in ``metadata``; None if missing."""
    info = metadata.topics.get(naming.kafka_topic(naming.TRANS_HALF_TOPIC))
    return len(info.partitions) if info is not None and info.partitions else None


def ensure_single_queue_topic(
    admin: AdminClient,
    kafka_topic: str,
    timeout_s: float,
    config: Mapping[str, str] | None = None,
) -> None:
    """Create a one-partition topic unless it exists (the broker's replication default), with
    ``config`` (say :data:`COMPACTED`) if it is new.

    Raises :class:`KafkaUnavailableError` when Kafka does not answer within ``timeout_s``:
    that it cannot be reached, when it cannot (not that the topic could not be made)."""
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaUnavailableError(
            f"cannot reach Kafka within {timeout_s:g} s ({exc.args[0].str()})"
        ) from exc
    new = NewTopic(kafka_topic, 1, config=dict(config or {}))
    future = admin.create_topics([new], request_timeout=timeout_s)[kafka_topic]
    try:
        future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise KafkaUnavailableError(
            f"Kafka did not create {naming.decode(kafka_topic)} within {timeout_s:g} s"
        ) from None
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


DEFAULT_QUEUES = 4
"""Partitions of a topic made by ``rmq-adapter topics create``: RocketMQ's
``defaultTopicQueueNums``."""


def create_topic(
    conf: Mapping[str, Any],
    topic: str,
    partitions: int,
    replication: Replication,
    timeout_s: float = 30.0,
    configs: Mapping[str, str] | None = None,
) -> tuple[bool, int]:
    """Create the application topic ``topic`` (a Kafka name) with ``configs`` unless it exists:
    (whether this call created it, its partition count). An existing topic is left as it is,
    whatever its layout (``mqadmin updateTopic`` is idempotent too).

    Raises :class:`TopicLayoutError` when Kafka refuses it (with Kafka's reason) and
    :class:`KafkaUnavailableError` when Kafka does not answer within ``timeout_s``."""
    metadata = clients.reach(conf, timeout_s)
    found = metadata.topics.get(topic)
    if found is not None and found.error is None:
        return False, len(found.partitions)
    spec = TopicSpec(topic, partitions, dict(configs or {}), replication=replication)
    admin = clients.admin(conf)  # held until the answer came: a dropped client cancels it
    future = admin.create_topics([spec.new_topic()], operation_timeout=timeout_s)
    try:
        future[topic].result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise KafkaUnavailableError(
            f"Kafka did not create {naming.decode(topic)} within {timeout_s:g} s"
        ) from None
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise TopicLayoutError(
                f"Kafka refused to create {naming.decode(topic)}: {error.str()}",
                topic=naming.decode(topic),
            ) from exc
        return False, PartitionCounts(admin.list_topics, timeout_s).count(topic)
    return True, partitions


def set_topic_configs(
    admin: AdminClient, topic: str, configs: Mapping[str, str], timeout_s: float
) -> None:
    """Set ``configs`` on the existing topic ``topic`` (a Kafka name), leaving its others."""
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=timeout_s)
