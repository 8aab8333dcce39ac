"""The 5.x ``SimpleConsumer`` (a Kafka share group) beside a raw confluent-kafka ShareConsumer.

Measures receive + ack messages/s of one topic (4 partitions) pre-filled with N messages of
100 bytes (default 20,000) by the 5.x ``Producer``'s ``send_async``; each phase reads the
whole topic with a share group of its own (``share.auto.offset.reset=earliest``), in this
order:

- raw, ack per batch (the baseline): one ``ShareConsumer`` in explicit acknowledgement mode,
  ``poll``, ``acknowledge(ACCEPT)`` each record, one ``commit_sync`` per batch;
- adapter, 1 thread: ``receive(max_message_num, invisible_duration)`` (32, 30 s) and
  ``ack(message)`` of each message;
- adapter, 4 threads: the same loop on 4 threads sharing one ``SimpleConsumer``;
- raw, commit per message: the baseline with one ``commit_sync`` per record, the same
  round trips as the adapter's ``ack`` (ACCEPT and commit at once, as a 5.x ack is
  synchronous), to show how much of the gap is the protocol and how much is the client.

The raw consumers' share groups get the configs the adapter sets (read_committed, earliest,
the broker's longest lock, the adapter's delivery count limit). A phase's rate runs from its
first received message to its last acknowledgement, so the share group's join (a few seconds,
shown apart as "first after") is not in it. Every body carries its index: each phase reports
how many deliveries it saw, how many distinct messages, how many came twice or more, how many
never came, how many deliveries had a delivery count above 1 and how many acks Kafka refused
(for the raw consumers: partitions a ``commit_sync`` reported failed).

Known gaps: a single run on a shared 2-core machine, broker and clients on the same cores
(±20 %); the phases run one after another, not interleaved, so a change of machine load
between them moves the ratio (the 1-minute load average at each phase's start is shown; it
includes this script's own broker and previous phase). The per-batch baseline's window is a
fraction of a second at 20,000 messages (much of it fetched during the join), so that figure
is the noisiest. 100-byte messages and one topic only; no tag filter (``*``); the raw
baselines are one thread. A phase ends when every message came, when none came for
``--idle`` seconds, or after ``--timeout``.

``bench/rocketmq.py --workloads simple`` runs the adapter's phases (``adapter_phase``) beside
Apache RocketMQ 5.4.0's own SimpleConsumer driven by the same loop (``drain``).

Run: ``python -m bench.simple_consumer [--messages N] [--batch 32] [--threads 4]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from adapter import naming
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.kafka import clients, topics
from adapter.v5 import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)
from adapter.v5.exception import ClientException
from adapter.v5.share_group import FETCH_WAIT_S, attempts_and_limit, broker_limits, configure_group
from bench.common import Table, kafka, new_topic, rate

log = logging.getLogger("bench.simple_consumer")

BODY_SIZE = 100
INDEX_DIGITS = 9
AWAIT_S = 2.0
"""The SimpleConsumer's long poll: short, so that the threads stop soon after the last one."""
REQUEST_TIMEOUT_S = 10.0


def body(index: int) -> bytes:
    return f"{index:0{INDEX_DIGITS}d}".encode().ljust(BODY_SIZE, b".")


def index_of(value: bytes | None) -> int:
    return int((value or b"-1")[:INDEX_DIGITS])


@dataclass
class Tally:
    """What one phase saw, shared by its threads."""

    expected: int
    counts: bytearray = field(init=False)
    deliveries: int = 0
    distinct: int = 0
    foreign: int = 0
    redelivered: int = 0
    ack_failures: int = 0
    receive_errors: int = 0
    first_error: str | None = None
    started: float = field(default_factory=time.perf_counter)
    first: float | None = None
    last_ack: float | None = None
    last_new: float = field(default_factory=time.perf_counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.counts = bytearray(self.expected)

    def saw(self, index: int, delivery_count: int | None) -> None:
        with self.lock:
            now = time.perf_counter()
            if self.first is None:
                self.first = now
            self.deliveries += 1
            if (delivery_count or 1) > 1:
                self.redelivered += 1
            if not 0 <= index < self.expected:
                self.foreign += 1
                return
            if self.counts[index] == 0:
                self.distinct += 1
                self.last_new = now
            self.counts[index] = min(255, self.counts[index] + 1)

    def acked(self, failures: int = 0) -> None:
        with self.lock:
            self.last_ack = time.perf_counter()
            self.ack_failures += failures

    def receive_failed(self, exc: BaseException) -> None:
        with self.lock:
            self.receive_errors += 1
            self.first_error = self.first_error or f"receive: {type(exc).__name__}: {exc}"

    def finished(self, idle_s: float, deadline: float) -> bool:
        now = time.perf_counter()
        with self.lock:
            return self.distinct >= self.expected or now - self.last_new > idle_s or now > deadline

    @property
    def twice(self) -> int:
        return sum(1 for c in self.counts if c > 1)

    @property
    def missing(self) -> int:
        return self.expected - self.distinct

    def msgs_per_s(self) -> float:
        if self.first is None or self.last_ack is None:
            return 0.0
        return rate(self.distinct, self.last_ack - self.first)

    def first_after_s(self) -> float | None:
        return None if self.first is None else self.first - self.started


def message(topic: str, index: int) -> Message:
    out = Message()
    out.topic = topic
    out.body = body(index)
    out.tag = "TagA"
    return out


def fill(bootstrap: str, topic: str, n: int) -> float:
    """Send ``n`` messages with the 5.x producer's ``send_async``; the messages/s."""
    producer = Producer(ClientConfiguration(bootstrap, Credentials(), request_timeout=30))
    producer.startup()
    try:
        started = time.perf_counter()
        futures = [producer.send_async(message(topic, i)) for i in range(n)]
        for future in futures:
            future.result(timeout=60)
        return rate(n, time.perf_counter() - started)
    finally:
        producer.shutdown()


def adapter_phase(
    bootstrap: str, topic: str, n: int, threads: int, batch: int, invisible_s: float,
    idle_s: float, timeout_s: float,
) -> Tally:  # fmt: skip
    """``threads`` threads sharing one SimpleConsumer: receive ``batch``, ack each."""
    config = ClientConfiguration(bootstrap, Credentials(), request_timeout=REQUEST_TIMEOUT_S)
    group = f"GID_bench_simple_{uuid.uuid4().hex[:6]}"
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, AWAIT_S)
    tally = Tally(n)
    consumer.startup()
    drain(consumer, tally, threads, batch, invisible_s, idle_s, timeout_s, ClientException)
    consumer.shutdown()
    return tally


def drain(
    consumer: Any, tally: Tally, threads: int, batch: int, invisible_s: float, idle_s: float,
    timeout_s: float, refused: type[Exception], retried: tuple[type[Exception], ...] = (),
) -> None:  # fmt: skip
    """``threads`` threads sharing ``consumer``, a started 5.x SimpleConsumer (the adapter's or
    Apache RocketMQ's own: the same API): ``receive(batch, invisible_s)``, ``ack`` each, until
    ``tally`` is finished. An ack raising ``refused`` is counted; a receive raising one of
    ``retried`` is counted and tried again 0.2 s later (any other error ends the phase). The
    threads are joined before this returns, so before the caller's ``shutdown()``."""
    deadline = time.perf_counter() + timeout_s

    def work() -> None:
        while not tally.finished(idle_s, deadline):
            try:
                received = consumer.receive(batch, invisible_s)
            except retried as exc:
                tally.receive_failed(exc)
                time.sleep(0.2)
                continue
            for message in received or ():
                tally.saw(index_of(message.body), message.delivery_attempt)
                try:
                    consumer.ack(message)
                    tally.acked()
                except refused as exc:
                    log.warning("ack of %s refused: %s", message.message_id, exc)
                    tally.acked(failures=1)

    run_threads(work, threads)


def raw_phase(bootstrap: str, topic: str, n: int, per_message: bool, idle_s: float,
              timeout_s: float) -> Tally:  # fmt: skip
    """One raw ShareConsumer, explicit acknowledgement: ACCEPT each record, ``commit_sync``
    per batch (or per record)."""
    group = f"bench_share_{uuid.uuid4().hex[:6]}"
    tally = Tally(n)  # from here, as the adapter's phase counts its startup()
    settings = KafkaSettings(bootstrap)
    admin = clients.admin(settings.librdkafka({}))
    limits = broker_limits(admin, REQUEST_TIMEOUT_S)
    _attempts, count_limit = attempts_and_limit(limits.max_delivery_count, None)
    configure_group(
        admin, group, lock_ms=limits.max_lock_ms, delivery_count_limit=count_limit,
        timeout_s=REQUEST_TIMEOUT_S,
    )  # fmt: skip
    consumer = clients.share_consumer(
        settings.librdkafka(
            {
                "group.id": group,
                "share.acknowledgement.mode": "explicit",
                "fetch.wait.max.ms": int(FETCH_WAIT_S * 1000),  # as the adapter's members
            }
        )
    )
    consumer.subscribe([naming.kafka_topic(topic)])
    deadline = time.perf_counter() + timeout_s
    try:
        while not tally.finished(idle_s, deadline):
            records = [r for r in consumer.poll(1.0) if r.error() is None]
            for record in records:
                tally.saw(index_of(record.value()), record.delivery_count())
                consumer.acknowledge(record, AcknowledgeType.ACCEPT)
                if per_message:
                    tally.acked(commit(consumer))
            if records and not per_message:
                tally.acked(commit(consumer))
    finally:
        consumer.close()
    return tally


def commit(consumer: ShareConsumer) -> int:
    """``commit_sync``; how many partitions Kafka refused."""
    try:
        result = consumer.commit_sync(REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        log.warning("commit_sync failed: %s", exc)
        return 1
    return sum(1 for failure in result.values() if failure is not None)


def run_threads(work: Callable[[], None], count: int) -> None:
    """Run ``work`` on ``count`` threads; re-raise the first failure."""
    failures: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failures.append(exc)

    workers = [threading.Thread(target=guarded, name=f"bench-{i}") for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise failures[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=32, help="receive's max_message_num")
    parser.add_argument("--invisible", type=float, default=30.0, help="seconds")
    parser.add_argument("--threads", type=int, default=4, help="of the threaded phase")
    parser.add_argument("--idle", type=float, default=30.0, help="end a phase after s quiet")
    parser.add_argument("--timeout", type=float, default=240.0, help="longest phase, s")
    parser.add_argument("-v", "--verbose", action="store_true", help="the adapter's INFO log")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.verbose:
        logging.getLogger("adapter").setLevel(logging.INFO)
    n, limits = args.messages, (args.idle, args.timeout)
    table = Table(
        f"bench/simple_consumer.py: 5.x SimpleConsumer vs raw ShareConsumer, {n:,} x 100 B, "
        f"receive({args.batch}, {args.invisible:g} s) + ack"
    )
    with kafka() as bootstrap:
        topics.init_topics(
            {"bootstrap.servers": bootstrap}, topics.system_layout(8, DelayLevels.parse())
        )
        topic = new_topic(bootstrap, 4, "Simple")
        print(f"pre-filled {n:,} messages at {fill(bootstrap, topic, n):,.0f} msgs/s")
        phases: list[tuple[str, Callable[[], Tally]]] = [
            ("raw ShareConsumer, commit per batch", lambda: raw_phase(
                bootstrap, topic, n, False, *limits)),
            ("SimpleConsumer, 1 thread", lambda: adapter_phase(
                bootstrap, topic, n, 1, args.batch, args.invisible, *limits)),
            (f"SimpleConsumer, {args.threads} threads", lambda: adapter_phase(
                bootstrap, topic, n, args.threads, args.batch, args.invisible, *limits)),
            ("raw ShareConsumer, commit per message", lambda: raw_phase(
                bootstrap, topic, n, True, *limits)),
        ]  # fmt: skip
        baseline = 0.0
        for name, phase in phases:
            load = os.getloadavg()[0]
            print(f"{time.strftime('%H:%M:%S')} {name} (load {load:.2f}) ...", flush=True)
            tally = phase()
            msgs_s = tally.msgs_per_s()
            baseline = baseline or msgs_s
            first = tally.first_after_s()
            if tally.foreign:
                print(f"{name}: {tally.foreign} deliveries of bodies not sent by this run")
            table.add(
                name, f"{tally.deliveries:,}", f"{tally.distinct:,}", tally.twice,
                tally.missing, tally.redelivered, tally.ack_failures,
                "-" if first is None else f"{first:.1f}", f"{msgs_s:,.0f}",
                f"{msgs_s / baseline:.3f}" if baseline else "-", f"{load:.2f}",
            )  # fmt: skip
    table.print(
        ("consumer", "received", "distinct", "twice", "missing", "count>1", "refused",
         "first after s", "msgs/s", "ratio", "load")
    )  # fmt: skip


if __name__ == "__main__":
    main()
