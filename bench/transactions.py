"""Transactional messages: throughput, commit-to-visible latency, check timing, coordinator memory.

One transaction coordinator runs as its own process (``rmq-adapter worker transactions``, as in
production); the messages are sent by one ``TransactionMQProducer`` shared by 8 threads, as
applications share one. A read_committed reader of the real topic runs in a child process
(so the senders do not hold its GIL) and stamps when each body first arrives.

- throughput: N messages (default 20,000, 100-byte bodies), local transaction returns COMMIT.
  End to end = N / (last arrival - first send); the sending rate alone is printed too.
  Commit-to-visible = arrival - the moment ``local_execute`` returned COMMIT (same clock,
  matched by body); reported for this run as "under load".
- latency: L messages (default 2,000) paced at ~500/s from the 8 threads, so that the figure is
  latency, not queueing; same commit-to-visible measure.
- first check: coordinator with ``--transaction-timeout-ms 2000 --check-interval-ms 60000``;
  K messages (default 200, paced at 50/s) whose local transaction returns UNKNOWN; the checker
  notes the time of its first call per message id and answers COMMIT.
  Reported: first call - (born timestamp + 2,000 ms); calls before born + timeout count as early
  (must be 0); the K messages must then reach the real topic.
- baseline, same run: Kafka's own transactional producer (confluent-kafka, acks=all), one message
  per transaction (begin, produce, commit) from 8 threads, each with its own transactional id;
  commit-to-visible measured from the ``commit_transaction()`` call.
- memory: coordinator with ``--transaction-timeout-ms 3600000`` (nothing is checked); P pending
  1 KiB half messages (default 100,000, local transaction UNKNOWN); once its
  ``rmq_transactions_pending`` gauge reaches P, the coordinator process's VmRSS and VmHWM.
  It runs last: the pending halves stay in HALF, so run against a broker of its own (the
  default; with ``KAFKA_BOOTSTRAP`` a later coordinator would check them).

Run: ``python -m bench.transactions [--messages N] [--latency L] [--checks K] [--baseline B]
[--pending P] [--quick]`` (``--quick`` divides every count by 10; ``make bench`` runs it too).
Coordinator logs go to ``bench/.out/transactions/``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from adapter import naming
from adapter.client import Message, TransactionMQProducer, TransactionStatus
from adapter.delay import DelayLevels
from adapter.kafka import clients, reading, topics
from adapter.message import ReceivedMessage
from bench.common import (
    ChildRun,
    Coordinator,
    Table,
    free_port,
    kafka,
    new_topic,
    now_ms,
    rate,
    reader_of_new_topic,
)

THREADS = 8
TIMEOUT_MS = 2000  # the first-check phase's --transaction-timeout-ms
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / ".out" / "transactions"

Got = dict[bytes, int]  # body -> first arrival (epoch ms)


def body(tag: str, i: int, size: int) -> bytes:
    return f"{tag}:{i:09d}:".encode().ljust(size, b".")


def percentiles(values: list[int]) -> tuple[str, str, str]:
    if not values:
        return "-", "-", "-"
    if len(values) == 1:
        return str(values[0]), str(values[0]), str(values[0])
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"{q[49]:.0f}", f"{q[98]:.0f}", str(max(values))


def p99(values: list[int]) -> float:
    if len(values) < 2:
        return float(values[0]) if values else float("inf")
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def met(ok: bool) -> str:
    return "yes" if ok else "NO"


# -- the coordinator process ----------------------------------------------------------------


def pending_gauge(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:  # noqa: S310
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("rmq_transactions_pending "):
            return float(line.split()[1])
    return None


# -- the read_committed reader, in a child process --------------------------------------------


def _read(bootstrap: str, topic: str, n: int, timeout: float, ready: Any, out: Any) -> None:
    c = reader_of_new_topic(bootstrap, topic)
    c.consume(1, 0.5)
    ready.put(True)
    got: Got = {}
    duplicates = 0
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            records = reading.fetch(c, 1000, 0.05)
            at = now_ms()
            for r in records:
                if r.error() is None:
                    value = r.value() or b""
                    if value in got:
                        duplicates += 1
                    else:
                        got[value] = at
        # A short look for duplicates arriving after the last message.
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            for r in c.consume(1000, 0.1):
                if r.error() is None:
                    duplicates += 1 if (r.value() or b"") in got else 0
    finally:
        c.close()
    out.put((got, duplicates))


class Reader:
    """Reads ``n`` bodies of ``topic`` in a child process, from before the first is sent."""

    def __init__(self, bootstrap: str, topic: str, n: int, timeout: float) -> None:
        self._timeout = timeout
        self._child = ChildRun(_read, (bootstrap, topic, n, timeout), f"the reader of {topic}")

    def wait(self) -> tuple[Got, int]:
        got, duplicates = self._child.result(self._timeout + 120)
        return got, duplicates


# -- sending ----------------------------------------------------------------------------------


class Sent:
    def __init__(self) -> None:
        self.started = 0.0
        self.finished = 0.0
        self.count = 0
        self.errors = 0
        self.first_error: str | None = None
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            if self.first_error is None:
                self.first_error = f"{type(exc).__name__}: {exc}"

    @property
    def seconds(self) -> float:
        return self.finished - self.started


def run_threads(
    n: int, send_one: Callable[[int], None], deadline_s: float, per_second: float = 0
) -> Sent:
    """Send ``n`` messages from ``THREADS`` threads, thread j taking i = j, j+8, ...;
    ``per_second`` > 0 paces them (message i at start + i / per_second)."""
    sent = Sent()
    counts = [0] * THREADS
    start = time.time() + 0.05
    deadline = time.monotonic() + deadline_s

    def work(j: int) -> None:
        for i in range(j, n, THREADS):
            if time.monotonic() > deadline:
                return
            if per_second > 0:
                delay = start + i / per_second - time.time()
                if delay > 0:
                    time.sleep(delay)
            try:
                send_one(i)
            except Exception as exc:  # noqa: BLE001 - counted and reported in the table
                sent.failed(exc)
            else:
                counts[j] += 1

    threads = [threading.Thread(target=work, args=(j,)) for j in range(THREADS)]
    sent.started = start
    while time.time() < start:
        time.sleep(0.001)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sent.finished = time.time()
    sent.count = sum(counts)
    return sent


class Transactions:
    """One ``TransactionMQProducer`` (a fresh group) and what its callbacks saw."""

    def __init__(self, bootstrap: str, answer: TransactionStatus) -> None:
        self.answer = answer
        self.committed_at: dict[bytes, int] = {}
        self.first_check: dict[str, tuple[int, int]] = {}  # id -> (first call ms, born ms)
        self.check_calls = 0
        self.group = f"GID_bench_tx_{uuid.uuid4().hex[:8]}"
        self.producer = TransactionMQProducer(self.group, self.check)
        self.producer.set_name_server_address(bootstrap)
        self.producer.start()

    def local_execute(self, msg: ReceivedMessage, user_args: Any) -> TransactionStatus:
        if self.answer is TransactionStatus.COMMIT:
            self.committed_at[msg.body] = now_ms()
        return self.answer

    def check(self, msg: ReceivedMessage) -> TransactionStatus:
        at = now_ms()
        self.check_calls += 1
        self.first_check.setdefault(msg.id, (at, msg.born_timestamp))
        return TransactionStatus.COMMIT

    def send(self, topic: str, payload: bytes) -> None:
        m = Message(topic)
        m.set_body(payload)
        self.producer.send_message_in_transaction(m, self.local_execute)

    def close(self) -> None:
        self.producer.shutdown()


def visible_latencies(committed_at: dict[bytes, int], got: Got) -> list[int]:
    return [at - committed_at[b] for b, at in got.items() if b in committed_at]


# -- the phases -------------------------------------------------------------------------------


def bench_throughput(
    bootstrap: str, coordinator: Coordinator, n: int, paced: int, pace: float, table: Table
) -> None:
    tx = Transactions(bootstrap, TransactionStatus.COMMIT)
    try:
        tx.send(new_topic(bootstrap, 4, "TxWarmUp"), body("warm", 0, 100))

        topic = new_topic(bootstrap, 4, "TxThroughput", prime=True)
        reader = Reader(bootstrap, topic, n, timeout=max(180.0, n / 100))
        cpu = coordinator.cpu_seconds(), time.process_time()
        sent = run_threads(n, lambda i: tx.send(topic, body("t", i, 100)), deadline_s=600)
        got, dups = reader.wait()
        cpu = coordinator.cpu_seconds() - cpu[0], time.process_time() - cpu[1]
        last = max(got.values(), default=0)
        end_to_end = rate(len(got), last / 1000 - sent.started) if len(got) == n else 0.0
        lat = visible_latencies(tx.committed_at, got)
        notes = (
            f"{dups} duplicates, {tx.check_calls} checks, {sent.errors} send errors; "
            f"CPU s: coordinator {cpu[0]:.1f}, senders {cpu[1]:.1f}"
        )
        if sent.first_error:
            notes += f" ({sent.first_error})"
        table.add(
            "throughput, end to end (8 threads, 100 B)",
            n,
            len(got),
            f"{end_to_end:,.0f}/s" if len(got) == n else "incomplete",
            "-",
            "-",
            "-",
            ">= 2,000/s",
            met(end_to_end >= 2000),
            notes,
        )
        table.add(
            "  sending alone (send_message_in_transaction)",
            sent.count,
            "-",
            f"{rate(sent.count, sent.seconds):,.0f}/s",
            "-",
            "-",
            "-",
            "-",
            "-",
            f"{sent.seconds:.1f} s",
        )
        table.add(
            "  commit-to-visible under load (ms)",
            len(lat),
            "-",
            "-",
            *percentiles(lat),
            "-",
            "-",
            "queueing included",
        )

        topic = new_topic(bootstrap, 4, "TxLatency", prime=True)
        before = tx.check_calls
        tx.committed_at.clear()
        reader = Reader(bootstrap, topic, paced, timeout=max(120.0, paced / pace + 60))
        sent = run_threads(
            paced,
            lambda i: tx.send(topic, body("l", i, 100)),
            deadline_s=paced / pace + 120,
            per_second=pace,
        )
        got, dups = reader.wait()
        lat = visible_latencies(tx.committed_at, got)
        table.add(
            f"commit-to-visible, paced {pace:.0f}/s (ms)",
            paced,
            len(got),
            f"sent at {rate(sent.count, sent.seconds):,.0f}/s",
            *percentiles(lat),
            "p99 <= 250 ms",
            met(len(got) == paced and p99(lat) <= 250),
            f"{dups} duplicates, {tx.check_calls - before} checks, {sent.errors} send errors",
        )
    finally:
        tx.close()


def bench_first_check(bootstrap: str, k: int, pace: float, table: Table) -> None:
    tx = Transactions(bootstrap, TransactionStatus.UNKNOWN)
    try:
        # Warm-up: one check answered end to end, so the check consumer has joined its group.
        warm = new_topic(bootstrap, 4, "TxWarmUp")
        tx.send(warm, body("warm", 0, 100))
        deadline = time.monotonic() + 60
        while not tx.first_check and time.monotonic() < deadline:
            time.sleep(0.1)
        if not tx.first_check:
            table.add("timeout to first check (ms)", k, 0, "warm-up check never came", *"------")
            return
        tx.first_check.clear()
        calls_before = tx.check_calls

        topic = new_topic(bootstrap, 4, "TxChecked", prime=True)
        reader = Reader(bootstrap, topic, k, timeout=max(120.0, k / pace + 60))
        sent = run_threads(
            k,
            lambda i: tx.send(topic, body("c", i, 100)),
            deadline_s=k / pace + 120,
            per_second=pace,
        )
        got, dups = reader.wait()
        deadline = time.monotonic() + 10
        while len(tx.first_check) < sent.count and time.monotonic() < deadline:
            time.sleep(0.1)
        after = [at - (born + TIMEOUT_MS) for at, born in tx.first_check.values()]
        early = sum(1 for v in after if v < 0)
        repeat = tx.check_calls - calls_before - len(tx.first_check)
        worst = max(after, default=10**9)
        table.add(
            f"timeout ({TIMEOUT_MS} ms) to first check, paced {pace:.0f}/s (ms)",
            k,
            len(tx.first_check),
            f"{len(got)} committed by check",
            *percentiles(after),
            "<= 1,000 ms, 0 early",
            met(len(tx.first_check) == k and worst <= 1000 and early == 0),
            f"{early} early, {repeat} repeated checks, {dups} duplicates, "
            f"{sent.errors} send errors",
        )
    finally:
        tx.close()


def bench_kafka_baseline(bootstrap: str, n: int, table: Table) -> None:
    topic = new_topic(bootstrap, 4, "KafkaTx", prime=True)
    kafka_topic = naming.kafka_topic(topic)
    committing: dict[bytes, int] = {}
    warm_up = naming.kafka_topic(new_topic(bootstrap, 1, "KafkaTxWarmUp"))
    producers = []
    for j in range(THREADS):
        p = clients.producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"bench-baseline-{uuid.uuid4().hex[:6]}-{j}",
                "acks": "all",
                "linger.ms": 1,
            }
        )
        p.init_transactions(30)
        # Warm-up transaction: the producer knows the topic before the clock starts.
        p.begin_transaction()
        p.produce(warm_up, b"warm")
        p.commit_transaction(30)
        producers.append(p)

    local = threading.local()
    pool = iter(producers)
    pool_lock = threading.Lock()

    def send_one(i: int) -> None:
        p = getattr(local, "producer", None)
        if p is None:
            with pool_lock:
                p = local.producer = next(pool)
        payload = body("k", i, 100)
        p.begin_transaction()
        p.produce(kafka_topic, payload)
        committing[payload] = now_ms()
        try:
            p.commit_transaction(30)
        except KafkaException:
            committing.pop(payload, None)
            p.abort_transaction(30)
            raise

    reader = Reader(bootstrap, topic, n, timeout=max(180.0, n / 20))
    sent = run_threads(n, send_one, deadline_s=max(300.0, n / 20))
    got, dups = reader.wait()
    for p in producers:
        p.flush(10)
    last = max(got.values(), default=0)
    end_to_end = rate(len(got), last / 1000 - sent.started)
    lat = visible_latencies(committing, got)
    table.add(
        "Kafka txn producer, 1 msg/txn, 8 threads (baseline)",
        n,
        len(got),
        f"{end_to_end:,.0f}/s (sending {rate(sent.count, sent.seconds):,.0f}/s)",
        *percentiles(lat),
        "-",
        "-",
        f"latency from commit_transaction(); {dups} duplicates, {sent.errors} errors",
    )


def bench_memory(bootstrap: str, n: int, table: Table) -> None:
    port = free_port()
    coordinator = Coordinator(
        bootstrap, OUT, "memory", "--transaction-timeout-ms", "3600000", "--metrics-port", str(port)
    )
    try:
        coordinator.wait_ready()
        idle = coordinator.memory_kb()
        tx = Transactions(bootstrap, TransactionStatus.UNKNOWN)
        try:
            topic = new_topic(bootstrap, 4, "TxPending")
            payload = b"p" * 1024
            sent = run_threads(n, lambda i: tx.send(topic, payload), deadline_s=900)
        finally:
            tx.close()
        deadline = time.monotonic() + 600
        pending = pending_gauge(port) or 0.0
        while pending < sent.count and time.monotonic() < deadline and coordinator.alive():
            time.sleep(1)
            pending = pending_gauge(port) or pending
        caught_up = time.time() - sent.finished
        memory = coordinator.memory_kb() if coordinator.alive() else {}
        rss_mb = memory.get("VmRSS", 0) / 1024
        hwm_mb = memory.get("VmHWM", 0) / 1024
        per_message = (memory.get("VmRSS", 0) - idle.get("VmRSS", 0)) * 1024 / max(1, pending)
        table.add(
            f"coordinator memory, {n:,} pending 1 KiB halves",
            sent.count,
            f"{pending:,.0f} pending",
            f"RSS {rss_mb:,.0f} MB, HWM {hwm_mb:,.0f} MB",
            "-",
            "-",
            "-",
            "RSS <= 512 MB",
            met(pending >= n and 0 < rss_mb <= 512),
            f"idle RSS {idle.get('VmRSS', 0) / 1024:.0f} MB, ~{per_message:,.0f} B/pending; "
            f"sent at {rate(sent.count, sent.seconds):,.0f}/s, all read {caught_up:.1f} s "
            f"after the last send; {sent.errors} send errors",
        )
        if not coordinator.alive():
            print(f"memory coordinator died:\n{coordinator.tail()}")
    finally:
        coordinator.stop()
        report_problems("memory", coordinator)


def report_problems(name: str, coordinator: Coordinator) -> None:
    problems = coordinator.problems()
    code = coordinator.process.returncode
    if problems or code not in (0, None):
        print(f"\ncoordinator '{name}' exit code {code}, {len(problems)} warning/error lines:")
        for line in problems[:10]:
            print("  " + line[:300])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000, help="throughput phase")
    parser.add_argument("--latency", type=int, default=2_000, help="paced latency phase")
    parser.add_argument("--pace", type=float, default=500.0, help="latency phase, msgs/s")
    parser.add_argument("--checks", type=int, default=200, help="first-check phase")
    parser.add_argument("--check-pace", type=float, default=50.0, help="first-check, msgs/s")
    parser.add_argument("--baseline", type=int, default=4_000, help="Kafka txn producer phase")
    parser.add_argument("--pending", type=int, default=100_000, help="memory phase")
    parser.add_argument("--quick", action="store_true", help="every count divided by 10")
    args = parser.parse_args()
    if args.quick:
        for name in ("messages", "latency", "checks", "baseline", "pending"):
            setattr(args, name, max(10, getattr(args, name) // 10))
    table = Table("Transactional messages, one coordinator process (latencies in ms)")
    with kafka() as bootstrap, contextlib.ExitStack() as stack:
        topics.init_topics(
            {"bootstrap.servers": bootstrap}, topics.system_layout(8, DelayLevels.parse())
        )

        coordinator = Coordinator(bootstrap, OUT, "default")
        stack.callback(report_problems, "default", coordinator)
        stack.callback(coordinator.stop)
        coordinator.wait_ready()
        bench_throughput(bootstrap, coordinator, args.messages, args.latency, args.pace, table)
        coordinator.stop()

        coordinator = Coordinator(
            bootstrap,
            OUT,
            "checks",
            "--transaction-timeout-ms",
            str(TIMEOUT_MS),
            "--check-interval-ms",
            "60000",
        )
        stack.callback(report_problems, "checks", coordinator)
        stack.callback(coordinator.stop)
        coordinator.wait_ready()
        bench_first_check(bootstrap, args.checks, args.check_pace, table)
        coordinator.stop()

        bench_kafka_baseline(bootstrap, args.baseline, table)
        bench_memory(bootstrap, args.pending, table)
    table.print(
        (
            "scenario",
            "messages",
            "seen",
            "result",
            "p50",
            "p99",
            "max",
            "target",
            "met?",
            "notes",
        )
    )


if __name__ == "__main__":
    main()
