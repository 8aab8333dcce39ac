"""``rmq-adapter status``: the delay levels' backlog and the groups' retry and dead-letter counts.

Plays the part of ``mqadmin`` views of ``SCHEDULE_TOPIC_XXXX`` (per-level offsets, like
``delayOffset.json``) and of ``%RETRY%`` / ``%DLQ%`` topics. Each level shows how many records
the forwarders have not yet consumed and when the oldest of them falls due; each group shows
its retry backlog (what it has not consumed from ``%RETRY%<group>``) and its dead letters.

The backlog is what a consumer will still be handed: the committed records from the group's
position on, read as the consumers read them (read_committed). Offsets alone would count the
markers Kafka transactions leave (one offset each) and the records of aborted ones: a backlog
of 1 where nothing waits.

Known gaps: a partition's backlog is counted by reading it, up to :data:`COUNT_LIMIT` records
(beyond, the offsets' difference is shown, with a ``~``); a record of a transaction still open
is not counted until it commits.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from adapter import naming
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.kafka import clients
from adapter.kafka.metadata import committed_offsets

_SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


@dataclass(frozen=True, slots=True)
class LevelRow:
    level: int | str
    """The delay level, or a timer's fine hop (``fine-50ms``)."""
    delay_ms: int
    backlog: int
    oldest_due_ms: int | None
    exact: bool = True
    """False: more than :data:`COUNT_LIMIT` records, the backlog is the offsets' difference."""


@dataclass(frozen=True, slots=True)
class GroupRow:
    group: str
    retry_backlog: int
    dead_letters: int
    exact: bool = True


COUNT_LIMIT = 100_000
"""Records read to count one partition's backlog; past it, the offsets' difference stands."""


@dataclass(frozen=True, slots=True)
class Backlog:
    """What a consumer will still be handed on one partition, and the first record's time."""

    records: int
    oldest_ms: int | None
    exact: bool = True


def gather(
    kafka: KafkaSettings, levels: DelayLevels, timeout_s: float = 30.0
) -> tuple[list[LevelRow], list[GroupRow]]:
    conf = kafka.librdkafka({})
    topics = clients.reach(conf, timeout_s).topics
    reader = clients.consumer(
        {
            **conf,
            "group.id": "rmq-adapter-status",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
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
                backlog = _backlog(reader, partitions[p], position, timeout_s)
                known = p < hops.partitions
                delay = hops.delay_ms(p) if known else levels.delay_ms(1)
                name = hops.label(p) if known else str(p + 1)
                due = None if backlog.oldest_ms is None else backlog.oldest_ms + delay
                level_rows.append(LevelRow(name, delay, backlog.records, due, backlog.exact))
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
            exact = True
            if "retry" in kinds:
                parts = [
                    TopicPartition(kinds["retry"], p) for p in topics[kinds["retry"]].partitions
                ]
                for tp, position in zip(
                    parts, committed_offsets(conf, group, parts, timeout_s), strict=True
                ):
                    backlog = _backlog(reader, tp, position, timeout_s)
                    retry_backlog += backlog.records
                    exact = exact and backlog.exact
            if "dlq" in kinds:
                for p in topics[kinds["dlq"]].partitions:
                    low, high = reader.get_watermark_offsets(
                        TopicPartition(kinds["dlq"], p), timeout=timeout_s
                    )
                    dead += high - low
            group_rows.append(GroupRow(group, retry_backlog, dead, exact))
        return level_rows, group_rows
    finally:
        reader.close()


def _backlog(reader: Consumer, tp: TopicPartition, position: int, timeout_s: float) -> Backlog:
    """The committed records of ``tp`` from ``position`` (the group's committed offset; its
    first record when none) to its end, read as a read_committed consumer reads them."""
    low, high = reader.get_watermark_offsets(tp, timeout=timeout_s)
    start = max(position, low) if position >= 0 else low
    if start >= high:
        return Backlog(0, None)
    reader.assign([TopicPartition(tp.topic, tp.partition, start)])
    deadline = time.monotonic() + timeout_s
    count, oldest = 0, None
    try:
        while count < COUNT_LIMIT and time.monotonic() < deadline:
            done = False
            for record in reader.consume(500, 1.0):
                error = record.error()
                if error is not None:
                    done = done or error.code() == KafkaError._PARTITION_EOF
                    continue
                if oldest is None:
                    oldest = int(record.timestamp()[1])
                count += 1
                done = done or (record.offset() or 0) >= high - 1
            if done:
                return Backlog(count, oldest)
    finally:
        reader.unassign()
    return Backlog(high - start, oldest, exact=False)


def duration(ms: int) -> str:
    """``ms`` as a person reads it: 250ms, 45s, 12m, 3h."""
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


def level_cells(row: LevelRow, now_ms: int) -> tuple[str, str, str, str]:
    """A level's row as shown: the level, its delay, its backlog and when its oldest is due."""
    if row.oldest_due_ms is None:
        due = "-"
    elif row.oldest_due_ms <= now_ms:
        due = f"overdue by {duration(now_ms - row.oldest_due_ms)}"
    else:
        due = f"in {duration(row.oldest_due_ms - now_ms)}"
    backlog = f"{'' if row.exact else '~'}{row.backlog}"
    return str(row.level), duration(row.delay_ms), backlog, due


def render(levels: list[LevelRow], groups: list[GroupRow], now_ms: int) -> str:
    """A plain-text report (pure: given the rows and the time)."""
    lines = [f"{'level':>10}  {'delay':>6}  {'backlog':>8}  oldest due"]
    for row in levels:
        level, delay, backlog, due = level_cells(row, now_ms)
        lines.append(f"{level:>10}  {delay:>6}  {backlog:>8}  {due}")
    if not levels:
        lines.append(f"  ({naming.SCHEDULE_TOPIC} does not exist: run `rmq-adapter topics init`)")
    lines.append("")
    lines.append(f"{'group':<40}  {'retry backlog':>13}  {'dead letters':>12}")
    for group in groups:
        retry = f"{'' if group.exact else '~'}{group.retry_backlog}"
        lines.append(f"{group.group:<40}  {retry:>13}  {group.dead_letters:>12}")
    if not groups:
        lines.append("  (no retry or dead-letter topics)")
    return "\n".join(lines)
