"""The schedule forwarder's Prometheus metrics.

Reproduces what RocketMQ exposes about delayed messages (per-level offsets in
``delayOffset.json``, the ``rocketmq_..._delay`` counters of its metrics exporter) as Prometheus
series: per-level backlog and forwarded counts, lateness, parked, refused and set-aside
deliveries, and how far the brokers' store stamps lie ahead of the forwarder's clock.

Known gaps: none.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from adapter.schedule.plan import Batch


class ForwarderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def per(kind: type[Counter] | type[Gauge], name: str, doc: str, label: str) -> Any:
            return kind(name, doc, [label], registry=registry)

        self.backlog = per(
            Gauge, "rmq_schedule_backlog", "Records of a level not yet forwarded.", "level"
        )
        self.forwarded = per(
            Counter, "rmq_schedule_forwarded", "Records forwarded to their real topic.", "level"
        )
        self.parked = per(
            Counter, "rmq_schedule_parked", "Records parked in the poison topic.", "reason"
        )
        self.refused = per(
            Counter,
            "rmq_schedule_refused",
            "Deliveries refused by a real topic and retried with back-off.",
            "level",
        )
        self.broker_clock_ahead = per(
            Gauge,
            "rmq_schedule_broker_clock_ahead_seconds",
            "How far the store time of the latest record read lay ahead of the forwarder's "
            "clock (a clock skew between the broker and the forwarder).",
            "level",
        )
        self.set_aside = per(
            Counter,
            "rmq_schedule_set_aside",
            "Records whose real topic did not exist, set aside to retry while their level went on.",
            "level",
        )
        self.hops = Counter(
            "rmq_schedule_timer_hops", "Timer records moved to their next hop.", registry=registry
        )
        self.recalled = Counter(
            "rmq_schedule_timer_recalled", "Recalled timers dropped.", registry=registry
        )
        self.lateness = Histogram(
            "rmq_schedule_lateness_seconds",
            "Commit time of a forwarded record minus its due (or a timer's deliver) time.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=registry,
        )

    def count(self, batch: Batch, now_ms: int, level: Callable[[int], str]) -> None:
        """Count a committed batch: forwarded records per level and their lateness, hops,
        dropped recalled timers and parked records."""
        forwarded: Tally[int] = Tally()
        aside: Tally[int] = Tally()
        for send in batch.sends:
            entry = send.entry
            if send.kind == "deliver":
                forwarded[entry.partition] += 1
                due = entry.item.deliver_ms if entry.item.deliver_ms is not None else entry.due_ms
                self.lateness.observe(max(0, now_ms - due) / 1000)
            elif send.kind == "hop":
                self.hops.inc()
            elif send.kind == "dropped" and entry.item.message_id is not None:
                self.recalled.inc()
            elif send.kind == "aside":
                aside[entry.partition] += 1
            elif send.kind == "park":
                self.parked.labels((send.reason or "unknown").split(":", 1)[0]).inc()
        for partition, count in forwarded.items():
            self.forwarded.labels(level(partition)).inc(count)
        for partition, count in aside.items():
            self.set_aside.labels(level(partition)).inc(count)

    def update_backlog(
        self,
        consumer: Consumer,
        positions: list[TopicPartition],
        waiting: dict[int, int],
        level: Callable[[int], str],
    ) -> dict[int, int]:
        """Set the backlog of each level from its position, its cached end offset and the
        records held in memory (``waiting``); return it."""
        backlog: dict[int, int] = {}
        for tp in positions:
            _, high = consumer.get_watermark_offsets(tp, cached=True)
            position = tp.offset if tp.offset >= 0 else high
            backlog[tp.partition] = max(0, high - position) + waiting.get(tp.partition, 0)
            self.backlog.labels(level(tp.partition)).set(backlog[tp.partition])
        return backlog
