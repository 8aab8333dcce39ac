"""Delayed delivery: lateness and forwarding throughput of one schedule forwarder process.

- burst: N messages (default 20,000, 100 bytes) sent at level 1 as fast as oneway sends go
  (from a child process, so that sending does not delay the receiver), one forwarder
  running. Lateness = when a read_committed reader of the real topic
  receives the message - its due time (the SCHEDULE record's LogAppendTime + 1 s).
  Baseline, same run: the same burst sent straight to a real topic, latency = receive time -
  send time (the record's CreateTime).
- drain: N messages parked at level 1 while no forwarder runs; once all are due, one forwarder
  starts. Throughput = N / (last - first forwarded record's timestamp).
- mixed: M messages spread over levels 1-3 (1 s, 5 s, 10 s); lateness per level.

Run: ``python -m bench.delay [--burst N] [--mixed M]`` (``make bench`` runs it too).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.client import Message, Producer
from adapter.delay import DelayLevels
from adapter.kafka import clients, reading, topics
from bench.common import (
    Table,
    kafka,
    new_topic,
    now_ms,
    rate,
    reader_of_new_topic,
    worker_command,
)

BODY = b"x" * 100
LEVELS = DelayLevels.parse()
SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
ROOT = Path(__file__).resolve().parent.parent


class Forwarder:
    """``rmq-adapter worker schedule`` as its own process, as in production."""

    def __init__(self, bootstrap: str) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv
            worker_command("schedule", bootstrap, f"bench-{uuid.uuid4().hex[:6]}"),
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def producer(bootstrap: str) -> Producer:
    p = Producer(f"GID_bench_{uuid.uuid4().hex[:6]}")
    p.set_name_server_address(bootstrap)
    p.start()
    return p


def send_burst(p: Producer, topic: str, n: int, level: Callable[[int], int]) -> None:
    for i in range(n):
        m = Message(topic)
        m.set_body(BODY)
        m.set_delay_time_level(level(i))
        p.send_oneway(m)
    assert p.flush(60) == 0


def _send_from_child(bootstrap: str, topic: str, n: int, levels: int, took: Any) -> None:
    p = producer(bootstrap)
    warm_up = Message("BenchWarmUp")  # the producer gets its id before the clock starts
    warm_up.set_body(BODY)
    p.send_sync(warm_up)
    started = time.monotonic()
    send_burst(p, topic, n, lambda i: 0 if levels == 0 else 1 + i % levels)
    took.put(time.monotonic() - started)
    p.shutdown()


def send_burst_elsewhere(bootstrap: str, topic: str, n: int, levels: int) -> float:
    """Send from a child process, so the sender does not hold the receiver's GIL; the
    seconds the burst took. ``levels`` 0 sends undelayed, else levels 1..levels in turn."""
    context = multiprocessing.get_context("spawn")  # no fork of a process running librdkafka
    took = context.Queue()
    child = context.Process(target=_send_from_child, args=(bootstrap, topic, n, levels, took))
    child.start()
    seconds = float(took.get(timeout=300))
    child.join(300)
    assert child.exitcode == 0, "the sender failed"
    return seconds


def schedule_end_offsets(bootstrap: str) -> dict[int, int]:
    c = clients.consumer({"bootstrap.servers": bootstrap, "group.id": "bench-peek"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(SCHEDULE, p), timeout=10)[1]
            for p in range(LEVELS.max_level)
        }
    finally:
        c.close()


def due_times(bootstrap: str, start: dict[int, int], n: int) -> dict[bytes, int]:
    """UNIQ_KEY -> due time, read from the SCHEDULE records written since ``start``."""
    c = clients.consumer({"bootstrap.servers": bootstrap, "group.id": "bench-due"})
    c.assign([TopicPartition(SCHEDULE, p, o) for p, o in start.items()])
    due: dict[bytes, int] = {}
    deadline = time.monotonic() + 120
    try:
        while len(due) < n and time.monotonic() < deadline:
            for r in c.consume(1000, 0.5):
                if r.error() is None:
                    level = int(r.partition()) + 1
                    due[dict(r.headers())[prop.UNIQ_KEY]] = r.timestamp()[1] + LEVELS.delay_ms(
                        level
                    )
    finally:
        c.close()
    return due


def receive(
    bootstrap: str, topic: str, n: int, timeout: float = 300
) -> list[tuple[bytes, int, int]]:
    """(UNIQ_KEY, receive time, record timestamp) of ``n`` records, read_committed."""
    c = reader_of_new_topic(bootstrap, topic)
    got: list[tuple[bytes, int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            records = reading.fetch(c, 1000, 0.05)
            at = now_ms()
            for r in records:
                if r.error() is None:
                    got.append((dict(r.headers())[prop.UNIQ_KEY], at, r.timestamp()[1]))
    finally:
        c.close()
    return got


def percentiles(values: list[int]) -> tuple[float, float, int]:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49], q[98], max(values)


class Receiver:
    """Receives ``n`` records of ``topic`` on a thread, from before the first one is sent."""

    def __init__(self, bootstrap: str, topic: str, n: int) -> None:
        self.records: list[tuple[bytes, int, int]] = []
        self.thread = threading.Thread(
            target=lambda: self.records.extend(receive(bootstrap, topic, n))
        )
        self.thread.start()
        time.sleep(2)  # joined and positioned before the first message

    def wait(self) -> list[tuple[bytes, int, int]]:
        self.thread.join()
        return self.records


def bench_burst(bootstrap: str, n: int, table: Table) -> None:
    # Baseline: the burst straight to a real topic.
    direct = new_topic(bootstrap, 4, "Direct", prime=True)
    receiver = Receiver(bootstrap, direct, n)
    send_burst_elsewhere(bootstrap, direct, n, 0)
    got = receiver.wait()
    p50, p99, worst = percentiles([at - ts for _, at, ts in got])
    table.add("direct send (baseline)", n, len(got), f"{p50:.0f}", f"{p99:.0f}", worst, "-")

    topic = new_topic(bootstrap, 4, "Delayed", prime=True)
    forwarder = Forwarder(bootstrap)
    time.sleep(8)  # the forwarder joins its group
    start = schedule_end_offsets(bootstrap)
    receiver = Receiver(bootstrap, topic, n)
    send_s = send_burst_elsewhere(bootstrap, topic, n, 1)
    got = receiver.wait()
    forwarder.stop()
    due = due_times(bootstrap, start, n)
    late = [at - due[key] for key, at, _ in got if key in due]
    p50, p99, worst = percentiles(late)
    early = sum(1 for v in late if v < 0)
    table.add(
        f"level 1 burst (sent in {send_s:.2f} s)",
        n,
        len(got),
        f"{p50:.0f}",
        f"{p99:.0f}",
        worst,
        early,
    )


def bench_drain(bootstrap: str, n: int, table: Table) -> float:
    topic = new_topic(bootstrap, 4, "Drain")
    p = producer(bootstrap)
    send_burst(p, topic, n, lambda i: 1)
    p.shutdown()
    time.sleep(1.5)  # every message is due
    receiver = Receiver(bootstrap, topic, n)
    forwarder = Forwarder(bootstrap)
    got = receiver.wait()
    forwarder.stop()
    stamps = sorted(ts for _, _, ts in got)
    throughput = rate(len(stamps) - 1, (stamps[-1] - stamps[0]) / 1000)
    table.add(f"drain of {n} due messages", n, len(got), "-", "-", "-", f"{throughput:,.0f}/s")
    return throughput


def bench_mixed(bootstrap: str, m: int, table: Table) -> None:
    topic = new_topic(bootstrap, 4, "Mixed", prime=True)
    forwarder = Forwarder(bootstrap)
    time.sleep(8)
    start = schedule_end_offsets(bootstrap)
    receiver = Receiver(bootstrap, topic, m)
    send_burst_elsewhere(bootstrap, topic, m, 3)
    got = receiver.wait()
    forwarder.stop()
    due = due_times(bootstrap, start, m)
    by_level: dict[int, list[int]] = {}
    levels_of = {}
    c = clients.consumer({"bootstrap.servers": bootstrap, "group.id": "bench-levels"})
    c.assign([TopicPartition(SCHEDULE, q, o) for q, o in start.items()])
    deadline = time.monotonic() + 60
    while len(levels_of) < m and time.monotonic() < deadline:
        for r in c.consume(1000, 0.5):
            if r.error() is None:
                levels_of[dict(r.headers())[prop.UNIQ_KEY]] = int(r.partition()) + 1
    c.close()
    for key, at, _ in got:
        if key in due:
            by_level.setdefault(levels_of[key], []).append(at - due[key])
    for level, late in sorted(by_level.items()):
        p50, p99, worst = percentiles(late)
        early = sum(1 for v in late if v < 0)
        table.add(
            f"mixed, level {level} ({LEVELS.delay_ms(level) // 1000} s)",
            len(late),
            len(late),
            f"{p50:.0f}",
            f"{p99:.0f}",
            worst,
            early,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--burst", type=int, default=20_000)
    parser.add_argument("--mixed", type=int, default=6_000)
    args = parser.parse_args()
    with kafka() as bootstrap:
        topics.init_topics(
            {"bootstrap.servers": bootstrap},
            topics.system_layout(topics.DEFAULT_HALF_PARTITIONS, LEVELS),
        )
        table = Table("Delayed delivery, one forwarder process (lateness in ms)")
        bench_burst(bootstrap, args.burst, table)
        bench_drain(bootstrap, args.burst, table)
        bench_mixed(bootstrap, args.mixed, table)
        table.print(("scenario", "sent", "received", "p50", "p99", "max", "early / rate"))


if __name__ == "__main__":
    main()
