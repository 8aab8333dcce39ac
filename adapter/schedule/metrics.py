"""The schedule forwarder's Prometheus metrics.

Reproduces what RocketMQ exposes about delayed messages (per-level offsets in
``delayOffset.json``, the ``rocketmq_..._delay`` counters of its metrics exporter) as Prometheus
series: per-level backlog and forwarded counts, lateness, parked and refused deliveries.

Known gaps: none.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
