"""``rmq-adapter status``: the delay levels' backlog and the groups' retry and dead-letter counts.

Plays the part of ``mqadmin`` views of ``SCHEDULE_TOPIC_XXXX`` (per-level offsets, like
``delayOffset.json``) and of ``%RETRY%`` / ``%DLQ%`` topics. Each level shows how many records
the forwarders have not yet consumed and when the oldest of them falls due; each group shows
its retry backlog (what it has not consumed from ``%RETRY%<group>``) and its dead letters.

Known gaps: counts come from offsets, so records of aborted transactions are counted as
backlog until the consumer moves past them.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from adapter import naming
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.kafka import clients
from adapter.kafka.io import committed_offsets

_SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


@dataclass(frozen=True, slots=True)
class LevelRow:
    level: int | str
    """The delay level, or a timer's fine hop (``fine-50ms``)."""
    delay_ms: int
    backlog: int
    oldest_due_ms: int | None


@dataclass(frozen=True, slots=True)
class GroupRow:
    group: str
    retry_backlog: int
    dead_letters: int


def gather(
    kafka: KafkaSettings, levels: DelayLevels, timeout_s: float = 30.0
) -> tuple[list[LevelRow], list[GroupRow]]:
    conf = kafka.librdkafka({})
    topics = clients.reach(conf, timeout_s).topics
    reader = clients.consumer(
        {**conf, "group.id": "rmq-adapter-status", "enable.auto.commit": False}
    )
    try:
        level_rows: list[LevelRow] = []
        if _SCHEDULE in topics:
            hops = HopTable.of(levels)
            count = len(topics[_SCHEDULE].partitions)
            partitions = [TopicPartition(_SCHEDULE, p) for p in range(count)]
            committed = committed_offsets(
                conf, naming.SCHEDULE_FORWARDER_GROUP, partitions, timeout_s
            )
            for p, position in enumerate(committed):
                low, high = reader.get_watermark_offsets(partitions[p], timeout=timeout_s)
                start = max(position, low) if position >= 0 else low
                oldest = _store_time(reader, p, start) if start < high else None
                known = p < hops.partitions
                delay = hops.delay_ms(p) if known else levels.delay_ms(1)
                name = hops.label(p) if known else str(p + 1)
                due = None if oldest is None else oldest + delay
                level_rows.append(LevelRow(name, delay, high - start, due))
        group_rows: list[GroupRow] = []
        groups: dict[str, dict[str, str]] = {}
        for kafka_topic in topics:
            topic = naming.decode(kafka_topic)
            group = naming.group_of(topic)
            if group is not None and not topic.startswith(naming.CHECK_PREFIX):
                kind = "retry" if naming.is_retry_topic(topic) else "dlq"
                groups.setdefault(group, {})[kind] = kafka_topic
        for group, kinds in sorted(groups.items()):
            retry_backlog = dead = 0
            if "retry" in kinds:
                parts = [
                    TopicPartition(kinds["retry"], p) for p in topics[kinds["retry"]].partitions
                ]
                for tp, position in zip(
                    parts, committed_offsets(conf, group, parts, timeout_s), strict=True
                ):
                    low, high = reader.get_watermark_offsets(tp, timeout=timeout_s)
                    retry_backlog += high - (max(position, low) if position >= 0 else low)
            if "dlq" in kinds:
                for p in topics[kinds["dlq"]].partitions:
                    low, high = reader.get_watermark_offsets(
                        TopicPartition(kinds["dlq"], p), timeout=timeout_s
                    )
                    dead += high - low
            group_rows.append(GroupRow(group, retry_backlog, dead))
        return level_rows, group_rows
    finally:
        reader.close()


def _store_time(reader: Consumer, partition: int, offset: int) -> int | None:
    reader.assign([TopicPartition(_SCHEDULE, partition, offset)])
    records = reader.consume(1, 5.0)
    reader.unassign()
    if not records or records[0].error() is not None:
        return None
    return int(records[0].timestamp()[1])


def _duration(ms: int) -> str:
    seconds = abs(ms) // 1000
    if abs(ms) < 1000:
        text = f"{abs(ms)}ms"
    elif seconds < 120:
        text = f"{seconds}s"
    elif seconds < 7200:
        text = f"{seconds // 60}m"
    else:
        text = f"{seconds // 3600}h"
    return text


def render(levels: list[LevelRow], groups: list[GroupRow], now_ms: int) -> str:
    """A plain-text report (pure: given the rows and the time)."""
    now = now_ms
    lines = [f"{'level':>10}  {'delay':>6}  {'backlog':>8}  oldest due"]
    for row in levels:
        if row.oldest_due_ms is None:
            due = "-"
        elif row.oldest_due_ms <= now:
            due = f"overdue by {_duration(now - row.oldest_due_ms)}"
        else:
            due = f"in {_duration(row.oldest_due_ms - now)}"
        delay = _duration(row.delay_ms)
        lines.append(f"{row.level!s:>10}  {delay:>6}  {row.backlog:>8}  {due}")
    if not levels:
        lines.append(f"  ({naming.SCHEDULE_TOPIC} does not exist: run `rmq-adapter topics init`)")
    lines.append("")
    lines.append(f"{'group':<40}  {'retry backlog':>13}  {'dead letters':>12}")
    for group in groups:
        lines.append(f"{group.group:<40}  {group.retry_backlog:>13}  {group.dead_letters:>12}")
    if not groups:
        lines.append("  (no retry or dead-letter topics)")
    return "\n".join(lines)
