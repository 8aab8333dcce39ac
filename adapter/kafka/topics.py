"""The system topic layout, and ``rmq-adapter topics init`` that creates it.

Reproduces the system topics a RocketMQ broker creates at start (``TopicConfigManager``):
the transaction half, op and discard topics and ``SCHEDULE_TOPIC_XXXX`` with one queue per
delay level. On Kafka, three rules must hold, and ``init`` refuses to go on when existing
topics break them:

1. ``RMQ_SYS_TRANS_HALF_TOPIC``, ``RMQ_SYS_TRANS_END_TOPIC`` and
   ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` have the same partition count (partition p of the three
   belongs to one coordinator at a time).
2. ``SCHEDULE_TOPIC_XXXX`` has exactly one partition per delay level (partition = level - 1).
3. ``SCHEDULE_TOPIC_XXXX`` stamps records with the broker's clock
   (``message.timestamp.type=LogAppendTime``): due time = store time + level delay.

Known gaps: RocketMQ uses one half queue; we use H (default 8) so coordinators scale out.
The layout is fixed at creation: changing H later needs a migration, which is not provided.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from adapter import naming
from adapter.delay import DelayLevels
from adapter.exceptions import KafkaUnavailableError, TopicLayoutError
from adapter.kafka import clients
from adapter.kafka.io import PartitionCounts

DEFAULT_HALF_PARTITIONS = 8
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
CO_PARTITIONED = (naming.TRANS_HALF_TOPIC, naming.TRANS_END_TOPIC, naming.TRANS_OP_TOPIC)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


def system_layout(
    half_partitions: int = DEFAULT_HALF_PARTITIONS, levels: DelayLevels | None = None
) -> list[TopicSpec]:
    if half_partitions <= 0:
        raise TopicLayoutError(f"half partitions must be positive, got {half_partitions}")
    levels = levels or DelayLevels.parse()
    return [
        *(TopicSpec(name, half_partitions) for name in CO_PARTITIONED),
        TopicSpec(naming.TRANS_CHECK_MAX_TIME_TOPIC, 1),
        TopicSpec(naming.SCHEDULE_TOPIC, levels.max_level, LOG_APPEND_TIME),
        TopicSpec(naming.POISON_TOPIC, 1),
    ]


def check_schedule_partitions(counts: PartitionCounts, levels: DelayLevels) -> None:
    """Refuse a ``SCHEDULE_TOPIC_XXXX`` that does not have one partition per delay level."""
    count = counts.count(naming.kafka_topic(naming.SCHEDULE_TOPIC))
    if count != levels.max_level:
        raise TopicLayoutError(
            f"{naming.SCHEDULE_TOPIC} has {count} partitions but the delay level table has "
            f"{levels.max_level} levels; they must match (one partition per level): run "
            "`rmq-adapter topics init` with the same delay levels (--delay-levels, "
            "RMQ_ADAPTER_DELAY_LEVELS)"
        )


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
        if count != spec.partitions:
            why = (
                "one partition per delay level"
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
    missing = [spec for spec in wanted if spec.name not in partitions]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, s.partitions, -1, config=dict(s.configs)) for s in missing],
        operation_timeout=timeout_s,
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


def ensure_single_queue_topic(admin: AdminClient, kafka_topic: str, timeout_s: float) -> None:
    """Create a one-partition topic unless it exists (the broker's replication default).

    Raises :class:`KafkaUnavailableError` when Kafka does not answer within ``timeout_s``."""
    future = admin.create_topics([NewTopic(kafka_topic, 1)], request_timeout=timeout_s)[kafka_topic]
    try:
        future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise KafkaUnavailableError(
            f"Kafka did not create {naming.decode(kafka_topic)} within {timeout_s:g} s"
        ) from None
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
