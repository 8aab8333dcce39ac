"""PartitionCounts: a cached count is read without asking Kafka, and only while it is fresh."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from adapter.clock import ManualClock
from adapter.kafka.metadata import PartitionCounts

pytestmark = pytest.mark.timeout(30)


class Cluster:
    """What ``list_topics`` answers, and how often it was asked."""

    def __init__(self, **counts: int) -> None:
        self.counts = counts
        self.asked = 0

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        self.asked += 1
        partitions = {n: {i: None for i in range(c)} for n, c in self.counts.items()}
        topics = {n: SimpleNamespace(partitions=p, error=None) for n, p in partitions.items()}
        return SimpleNamespace(topics=topics)


def test_a_cached_count_is_read_without_asking_kafka_until_it_grows_stale() -> None:
    cluster, clock = Cluster(orders=4), ManualClock(0)
    counts = PartitionCounts(cluster.list_topics, timeout_s=1, ttl_s=30, clock=clock)
    assert counts.cached("orders") == 0, "never looked up: unknown, and Kafka is not asked"
    assert cluster.asked == 0
    assert counts.require("orders") == 4
    assert (counts.cached("orders"), cluster.asked) == (4, 1)
    clock.advance(30_000)
    assert counts.cached("orders") == 0, "stale: the caller must look it up again"


def test_a_topic_found_missing_is_not_cached_as_a_count() -> None:
    cluster = Cluster()
    counts = PartitionCounts(cluster.list_topics, timeout_s=1, clock=ManualClock(0))
    assert counts.count("gone") == 0
    assert counts.cached("gone") == 0
