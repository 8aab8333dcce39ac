"""The transaction coordinator's Prometheus metrics.

Reproduces RocketMQ's transaction metrics (``TransactionMetrics``: half messages per topic, and
the commit/rollback/check counters of its exporter) as Prometheus series. The pending count and
the oldest pending age are read from the coordinator's state when Prometheus scrapes, so they
stay true while the coordinator is stalled (Kafka away), even once its partitions were dropped:
the count is the last known one, the age keeps growing (what an alert on them needs), and
``rmq_transactions_gauges_stale`` says so until the partitions are read back.

Known gaps: none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from adapter.transaction.state import Check, Commit, Discard, Duplicate, Refuse, Rollback

log = logging.getLogger(__name__)


class CoordinatorMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        pending: Callable[[], float],
        oldest_age_s: Callable[[], float],
        stale: Callable[[], bool],
    ) -> None:
        self.pending = Gauge(
            "rmq_transactions_pending", "Half messages waiting for a decision.", registry=registry
        )
        self.pending.set_function(pending)
        self.oldest_age = Gauge(
            "rmq_transactions_oldest_pending_age_seconds",
            "Age of the oldest pending half message (0 when none).",
            registry=registry,
        )
        self.oldest_age.set_function(oldest_age_s)
        self.stale = Gauge(
            "rmq_transactions_gauges_stale",
            "1 while the two gauges above hold the last values known before Kafka went away "
            "(partitions not read back yet), 0 once they are current.",
            registry=registry,
        )
        self.stale.set_function(lambda: float(stale()))

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, registry=registry)

        self.commits = counter("rmq_transactions_commits", "Half messages committed.")
        self.rollbacks = counter("rmq_transactions_rollbacks", "Half messages rolled back.")
        self.checks = counter("rmq_transactions_checks", "Checks sent to producer groups.")
        self.discards = counter(
            "rmq_transactions_discards", "Half messages parked in TRANS_CHECK_MAX_TIME_TOPIC."
        )
        self.refused = counter("rmq_transactions_refused", "Decisions refused (mismatch, late).")
        self.duplicates = counter(
            "rmq_transactions_duplicates", "Decisions for already resolved half messages."
        )
        self.parked = counter("rmq_transactions_parked", "Corrupt records parked as poison.")
        self.mark_reasks = counter(
            "rmq_transactions_mark_reasks",
            "Read marks written to END again because the last one did not come back in time "
            "(a transaction held open on END, or a consumer not fetching): checks there wait.",
        )
        self.commit_latency = Histogram(
            "rmq_transactions_commit_latency_seconds",
            "From the half message's birth to its commit being applied.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=registry,
        )

    def count(self, actions: Sequence[tuple[int, Any]], parked: int, now_ms: int) -> None:
        """Count a committed turn's actions; log the refused and duplicate decisions."""
        self.parked.inc(parked)
        for partition, action in actions:
            if isinstance(action, Commit):
                self.commits.inc()
                self.commit_latency.observe(max(0, now_ms - action.pending.info.born_ms) / 1000)
            elif isinstance(action, Rollback):
                self.rollbacks.inc()
            elif isinstance(action, Check):
                self.checks.inc()
            elif isinstance(action, Discard):
                self.discards.inc()
            elif isinstance(action, Refuse):
                self.refused.inc()
                log.warning(
                    "refused decision END %d@%d: %s", partition, action.end_offset, action.reason
                )
            elif isinstance(action, Duplicate):
                self.duplicates.inc()
                log.info(
                    "duplicate decision for transaction %s (half %d@%d) ignored",
                    action.end.transaction_id,
                    partition,
                    action.end.half_offset,
                )
