"""``rmq-adapter exporter``: consumer lag in Prometheus, under rocketmq-exporter's metric names.

Plays the part of apache/rocketmq-exporter for the consumer groups: dashboards and alerts built
for RocketMQ read ``rocketmq_message_accumulation{group, topic}`` (how far a group's commits lag
behind, summed over the topic's queues), ``rocketmq_consumer_offset{group, topic}`` and
``rocketmq_producer_offset{topic}``, with topic and group names as RocketMQ spells them
(``%RETRY%G`` included). ``rmq_dead_letters{group}`` counts each group's ``%DLQ%``. Every
``interval_s`` the exporter reads the groups through :class:`adapter.ops.groups.Groups` (the
offsets ``rmq-adapter groups lag`` reads, each topic's asked once for all groups) and replaces
its snapshot; a scrape serves the
snapshot, so a scrape never waits on Kafka. A refresh that fails keeps the last snapshot,
counts ``rmq_exporter_refresh_failures_total``, and ``/readyz`` turns 503 until one succeeds.

The 5.x ``SimpleConsumer``'s groups (Kafka share groups, :mod:`adapter.ops.share_groups`) are
exported under the same names: their accumulation is Kafka's share-partition lag, their
consumer offset the end offsets less that lag (:func:`adapter.ops.share_groups.position`: Kafka
persists the start offsets lazily, so a rate over them would lag behind the acks; a partition
not fetched yet counts from its earliest retained message).

Known gaps: share groups are read over plaintext listeners only (elsewhere they are left out,
logged once); rocketmq-exporter's per-second rates (``rocketmq_consumer_tps``) are left to
PromQL's ``rate()`` over the offsets.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from adapter import naming
from adapter.config import KafkaSettings
from adapter.exceptions import AdapterError
from adapter.ops import share_protocol as wire
from adapter.ops.groups import EARLIEST, LATEST, Groups, dead_letter_topic
from adapter.ops.share_groups import ShareGroups, ShareGroupsUnavailable, position

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ExporterConfig:
    kafka: KafkaSettings
    interval_s: float = 15.0
    timeout_s: float = 10.0
    system_groups: bool = False


@dataclass
class Snapshot:
    accumulation: dict[tuple[str, str], int] = field(default_factory=dict)
    consumer_offset: dict[tuple[str, str], int] = field(default_factory=dict)
    producer_offset: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)


def _share_starts(share: ShareGroups | None) -> dict[str, list[wire.StartOffset]]:
    """Each share group's start offsets (one request per coordinator for all of them); none
    when share groups cannot be read here."""
    if share is None:
        return {}
    return share.start_offsets([listed.group_id for listed in share.listed()])


def read_snapshot(
    groups: Groups, *, system_groups: bool, share: ShareGroups | None = None
) -> Snapshot:
    """Every consumer group's and share group's lag, offsets and dead letters, per RocketMQ
    topic: one listing, one commit lookup per group, and the topics' offsets asked once for
    all groups. A group that goes away meanwhile is left out, not the whole snapshot."""
    committed: dict[str, dict[tuple[str, int], int]] = {}
    dead_letter_topics: dict[str, str] = {}
    starts = _share_starts(share)
    for group in starts:
        dlq = dead_letter_topic(group)
        if dlq is not None:
            dead_letter_topics[group] = dlq
    for row in groups.rows():
        if row.system and not system_groups:
            continue
        group_id = row.group if row.instance is None else f"{row.group}@{row.instance}"
        try:
            committed[group_id] = groups.committed(group_id)
        except (KafkaException, TimeoutError) as exc:
            log.info("lag exporter: group %s left out of this reading: %s", group_id, exc)
            continue
        dlq = dead_letter_topic(row.group)
        if dlq is not None:
            dead_letter_topics[row.group] = dlq
    topics = {topic for offsets in committed.values() for topic, _ in offsets}
    topics |= {start.topic for found in starts.values() for start in found}
    partitions = groups.partitions(sorted(topics | set(dead_letter_topics.values())))
    ends = groups.offsets(partitions, LATEST)
    earliest = groups.offsets(partitions, EARLIEST)
    snap = Snapshot()
    for topic, partition in ends:
        name = naming.decode(topic)
        snap.producer_offset[name] = snap.producer_offset.get(name, 0) + ends[(topic, partition)]
    for group_id, offsets in committed.items():
        for (topic, partition), offset in offsets.items():
            if (topic, partition) not in ends:
                continue
            key = (group_id, naming.decode(topic))
            lag = max(ends[(topic, partition)] - offset, 0)
            snap.accumulation[key] = snap.accumulation.get(key, 0) + lag
            snap.consumer_offset[key] = snap.consumer_offset.get(key, 0) + offset
    for group, found in starts.items():
        for start in found:
            place = (start.topic, start.partition)
            if place not in ends:
                continue
            key = (group, naming.decode(start.topic))
            at = position(start, ends[place])
            offset = earliest[place] if at is None else at
            lag = max(ends[place] - offset, 0)
            snap.accumulation[key] = snap.accumulation.get(key, 0) + lag
            snap.consumer_offset[key] = snap.consumer_offset.get(key, 0) + offset
    for group, dlq in dead_letter_topics.items():
        held = [key for key in ends if key[0] == dlq]
        if held:
            snap.dead_letters[group] = sum(ends[key] - earliest[key] for key in held)
    return snap


class _SnapshotCollector(Collector):
    def __init__(self, current: Callable[[], Snapshot]) -> None:
        self._current = current

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self._current()
        accumulation = GaugeMetricFamily(
            "rocketmq_message_accumulation",
            "Messages a consumer group has not consumed (end offset minus its commit), per topic.",
            labels=["group", "topic"],
        )
        consumer = GaugeMetricFamily(
            "rocketmq_consumer_offset",
            "A consumer group's committed offsets, summed over the topic's queues.",
            labels=["group", "topic"],
        )
        for (group, topic), value in sorted(snap.accumulation.items()):
            accumulation.add_metric([group, topic], value)
        for (group, topic), value in sorted(snap.consumer_offset.items()):
            consumer.add_metric([group, topic], value)
        producer = GaugeMetricFamily(
            "rocketmq_producer_offset",
            "A topic's end offsets, summed over its queues.",
            labels=["topic"],
        )
        for topic, value in sorted(snap.producer_offset.items()):
            producer.add_metric([topic], value)
        dead = GaugeMetricFamily(
            "rmq_dead_letters", "Messages in a group's %DLQ% topic.", labels=["group"]
        )
        for group, value in sorted(snap.dead_letters.items()):
            dead.add_metric([group], value)
        yield from (accumulation, consumer, producer, dead)


class LagExporter:
    """A worker of the command line's kind: ``run_once`` refreshes, ``run`` every interval,
    ``stop(timeout)`` ends it."""

    name = "lag exporter"

    def __init__(self, config: ExporterConfig, registry: CollectorRegistry) -> None:
        self.config = config
        self._snapshot = Snapshot()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._last_ok: float | None = None
        self._share_unread = False
        self._last_turn = time.monotonic()
        registry.register(_SnapshotCollector(self.snapshot))
        self._failures = Counter(
            "rmq_exporter_refresh_failures",
            "Refreshes that failed (Kafka away).",
            registry=registry,
        )
        self._age = Gauge(
            "rmq_exporter_snapshot_age_seconds",
            "Seconds since the served snapshot was read (grows while refreshes fail).",
            registry=registry,
        )
        self._age.set_function(
            lambda: 0.0 if self._last_ok is None else time.monotonic() - self._last_ok
        )

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def run_once(self) -> None:
        conf = self.config.kafka.librdkafka({})
        groups = Groups(conf, self.config.timeout_s)
        share = ShareGroups(groups, conf, self.config.timeout_s)
        snap = read_snapshot(
            groups,
            system_groups=self.config.system_groups,
            share=share if self._readable(share) else None,
        )
        with self._lock:
            self._snapshot = snap
        self._last_ok = time.monotonic()

    def _readable(self, share: ShareGroups) -> bool:
        """Whether share groups can be read here; says once why not."""
        try:
            share.readable()
        except ShareGroupsUnavailable as exc:
            if not self._share_unread:
                log.warning("lag exporter: share groups left out: %s", exc)
            self._share_unread = True
            return False
        return True

    def run(self, burst: bool = False) -> None:
        log.info("lag exporter refreshing every %.0f s", self.config.interval_s)
        try:
            while not self._stopping.is_set():
                self._last_turn = time.monotonic()
                try:
                    self.run_once()
                except (AdapterError, KafkaException, TimeoutError) as exc:  # Kafka away
                    self._failures.inc()
                    log.warning("lag exporter: refresh failed, serving the last snapshot: %s", exc)
                if burst:
                    return
                self._stopping.wait(self.config.interval_s)
        finally:
            self._stopped.set()

    def stop(self, timeout: float | None = None) -> bool:
        self._stopping.set()
        return self._stopped.wait(timeout) if timeout is not None else True

    def alive(self, within_s: float) -> bool:
        return time.monotonic() - self._last_turn < within_s + self.config.interval_s

    def ready(self) -> bool:
        last = self._last_ok
        return last is not None and time.monotonic() - last < 3 * self.config.interval_s + 30
