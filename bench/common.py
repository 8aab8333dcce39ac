"""Shared benchmark plumbing: a broker to measure against, topics, and a result table."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from adapter import naming
from adapter.kafka import clients
from adapter.ops import broker


@contextlib.contextmanager
def kafka() -> Iterator[str]:
    """``KAFKA_BOOTSTRAP`` if set, else a local broker process stopped afterwards."""
    existing = os.environ.get("KAFKA_BOOTSTRAP")
    if existing:
        yield existing
        return
    data_dir = Path(tempfile.mkdtemp(prefix="rmq-bench-"))
    address = broker.start(broker.BrokerConfig(data_dir, port=broker.free_port_pair()))
    try:
        yield address
    finally:
        broker.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def new_topic(bootstrap: str, partitions: int = 4, prefix: str = "Bench") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = clients.admin({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return name


def reader_of_new_topic(bootstrap: str, topic: str) -> Consumer:
    """A read_committed consumer assigned every partition of ``topic`` (a RocketMQ name) from
    offset 0: assigned, not subscribed, so there is no group join to wait for."""
    c = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    kafka_topic = naming.kafka_topic(topic)
    partitions: dict = {}
    for _ in range(100):  # a new topic's metadata can take a moment to appear
        found = c.list_topics(kafka_topic, timeout=10).topics.get(kafka_topic)
        partitions = found.partitions if found is not None and found.error is None else {}
        if partitions:
            break
        time.sleep(0.1)
    c.assign([TopicPartition(kafka_topic, p, 0) for p in partitions])
    return c


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def machine() -> str:
    return f"{platform.node()} | {os.cpu_count()} cores | Python {platform.python_version()}"


class Table:
    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: list[tuple[str, ...]] = []

    def add(self, *cells: object) -> None:
        self.rows.append(tuple(str(c) for c in cells))

    def print(self, header: tuple[str, ...]) -> None:
        widths = [max(len(r[i]) for r in [header, *self.rows]) for i in range(len(header))]
        print(f"\n{self.title}  ({time.strftime('%Y-%m-%d')}, {machine()})")
        print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in self.rows:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
