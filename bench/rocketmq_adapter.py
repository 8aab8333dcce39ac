"""The adapter side of bench/rocketmq.py: the same workloads through the drop-in client
(``adapter.client``) on a Kafka broker of its own (``bench.common.kafka()``), with the adapter's
workers as their own processes, as in production.

- Transactions: one ``TransactionMQProducer`` shared by 8 threads, the transaction coordinator
  (``bench.common.Coordinator``, RocketMQ's defaults: first check 6 s after birth, then every
  30 s), and a read_committed reader of the real topic in a child process
  (``bench.transactions.Reader``). Commit-to-visible counts from the moment ``local_execute``
  returned COMMIT (``bench.transactions.Transactions``), so it includes the adapter's own commit.
- Normal sends: ``Producer.send_sync`` (acks=all) from 8 threads.
- Delayed messages: delay levels 1 and 2 (1 s, 5 s), one schedule forwarder process
  (``bench.delay.Forwarder``). Due time = the SCHEDULE record's LogAppendTime + the level's delay
  (``bench.delay.due_times``), received = when a read_committed reader of the real topic (in a
  child process, as RocketMQ's receiver) got it.
- 5.x SimpleConsumer: per phase a topic of 4 partitions pre-filled by the 5.x ``Producer``'s
  ``send_async``, drained by ``adapter.v5.SimpleConsumer`` (``bench.simple_consumer``: a share
  group of its own, ``receive(32, 30 s)`` + ``ack`` each, 1 then 4 threads sharing one consumer).
- Seed 004: a coordinator with the default check interval, then one with ``--check-interval-ms
  1000``; a read_committed reader counts every record of the real topic.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapter import properties as prop
from adapter.client import Message, TransactionMQProducer, TransactionStatus
from adapter.delay import DelayLevels
from adapter.kafka import reading, topics
from adapter.message import ReceivedMessage
from bench.client import adapter_producer
from bench.common import (
    ChildRun,
    Coordinator,
    kafka,
    new_topic,
    prime_partitions,
    reader_of_new_topic,
    transactional_topic_configs,
)
from bench.delay import SCHEDULE, Forwarder, due_times, schedule_end_offsets
from bench.push_consumer import run_push
from bench.rocketmq_figures import (
    DEFAULT_CHECK_INTERVAL_MS,
    FAST_CHECK_INTERVAL_MS,
    SEED_BODIES,
    SEED_EXPECTED,
    SEED_KEYS,
    SEED_ROLLBACK,
    SEED_SEND_GAP_S,
    SEED_UNKNOWN,
    SIMPLE_BATCH,
    SIMPLE_IDLE_S,
    SIMPLE_INVISIBLE_S,
    SIMPLE_TIMEOUT_S,
    Delayed,
    Drained,
    Figures,
    Latency,
    Seed,
    Sizes,
    Throughput,
    body,
    delay_name,
    now_ms,
    simple_runs,
)
from bench.rocketmq_server import OUT as ROCKETMQ_OUT
from bench.simple_consumer import adapter_phase, fill
from bench.transactions import Reader, Transactions, run_threads, visible_latencies

OUT: Path = ROCKETMQ_OUT / "adapter"
LEVELS = DelayLevels.parse()
DELAY_WARM_UP = 100  # delayed messages at level 1 through the forwarder before the timed runs

log = logging.getLogger("bench.rocketmq")


def _read_keyed(
    bootstrap: str,
    topic: str,
    n: int,
    timeout_s: float,
    linger_s: float,
    by_body: bool,
    ready: Any,
    out: Any,
) -> None:
    """The child process of :class:`Keyed`: put (first arrivals, deliveries, due times) on
    ``out``."""
    consumer = reader_of_new_topic(bootstrap, topic)
    consumer.consume(1, 0.5)  # positioned before the first message
    ready.put(True)
    first: dict[bytes, int] = {}
    deliveries: Counter[bytes] = Counter()
    due: dict[bytes, int] = {}
    deadline = time.monotonic() + timeout_s
    end: float | None = None
    try:
        while time.monotonic() < (end or deadline):
            records = reading.fetch(consumer, 1000, 0.05)
            at = now_ms()
            for r in records:
                if r.error() is not None:
                    continue
                headers = dict(r.headers() or [])
                key = (r.value() or b"") if by_body else headers[prop.UNIQ_KEY]
                deliveries[key] += 1
                first.setdefault(key, at)
                if prop.TIMER_DELIVER_MS in headers:
                    due[key] = int(headers[prop.TIMER_DELIVER_MS])
            if end is None and len(first) >= n:
                end = min(deadline, time.monotonic() + linger_s)
    finally:
        consumer.close()
    out.put((first, deliveries, due))


class Keyed:
    """A read_committed reader of a real topic in a child process, as RocketMQ's receiver is
    (a thread of the benchmark's process shares the GIL with its 8 sending threads and waits
    out its garbage collections): first arrival and deliveries per ``UNIQ_KEY`` (or per body),
    until ``n`` distinct ones arrived or the deadline, then ``linger_s`` more for duplicates;
    the due time of a timer message (its ``TIMER_DELIVER_MS``)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        n: int,
        timeout_s: float,
        linger_s: float = 1.0,
        by_body: bool = False,
    ) -> None:
        self.first: dict[bytes, int] = {}
        self.deliveries: Counter[bytes] = Counter()
        self.due: dict[bytes, int] = {}
        self._wait_s = timeout_s + linger_s + 60
        self._child = ChildRun(
            _read_keyed,
            (bootstrap, topic, n, timeout_s, linger_s, by_body),
            f"the reader of {topic}",
        )

    def wait(self) -> Keyed:
        self.first, self.deliveries, self.due = self._child.result(self._wait_s)
        return self

    @property
    def duplicates(self) -> int:
        return sum(c - 1 for c in self.deliveries.values())


# -- the workloads -----------------------------------------------------------------------------


def transactions(bootstrap: str, coordinator: Coordinator, sizes: Sizes, figures: Figures) -> None:
    """Throughput (8 threads, 100 B, committed end to end) and paced commit-to-visible; as
    bench.transactions.bench_throughput, with the numbers kept."""
    tx = Transactions(bootstrap, TransactionStatus.COMMIT)
    try:
        # Untimed warm-up through a reader of its own: the JVM's JIT, metadata, connections.
        w = sizes.warm_up
        log.info("adapter: warm-up, %d transactions (untimed)", w)
        fenced = transactional_topic_configs()
        topic = new_topic(bootstrap, 4, "TxWarmUp", configs=fenced)
        reader = Reader(bootstrap, topic, w, timeout=max(120.0, w / 20))
        run_threads(w, lambda i: tx.send(topic, body("w", i)), deadline_s=max(300, w / 10))
        reader.wait()
        tx.check_calls = 0

        n = sizes.tx_messages
        log.info("adapter: transactional throughput, %d messages from 8 threads", n)
        topic = new_topic(bootstrap, 4, "TxThroughput", prime=True, configs=fenced)
        reader = Reader(bootstrap, topic, n, timeout=max(180.0, n / 50))
        sent = run_threads(n, lambda i: tx.send(topic, body("t", i)), deadline_s=max(600, n / 20))
        got, dups = reader.wait()
        figures.tx = Throughput.end_to_end(sent, got, n)
        figures.tx_under_load = Latency.of(visible_latencies(tx.committed_at, got))
        if sent.first_error:
            figures.notes.append(f"adapter transactional sends: {sent.first_error}")
        if dups or tx.check_calls:
            figures.notes.append(
                f"adapter transactional throughput: {dups} duplicate deliveries, "
                f"{tx.check_calls} check-backs (all messages were committed at once)"
            )
        if not coordinator.alive():
            raise RuntimeError(f"the coordinator died:\n{coordinator.tail()}")

        tx.committed_at.clear()
        n, pace = sizes.paced, sizes.pace
        log.info("adapter: commit-to-visible, %d messages at %.0f/s", n, pace)
        topic = new_topic(bootstrap, 4, "TxLatency", prime=True, configs=fenced)
        reader = Reader(bootstrap, topic, n, timeout=max(120.0, n / pace + 60))
        run_threads(
            n,
            lambda i: tx.send(topic, body("l", i)),
            deadline_s=n / pace + 120,
            per_second=pace,
        )
        got, dups = reader.wait()
        figures.tx_paced = Latency.of(visible_latencies(tx.committed_at, got))
        if len(got) < n:
            figures.notes.append(f"adapter paced transactions: {n - len(got)} of {n} not seen")
    finally:
        tx.close()


def normal_sends(bootstrap: str, sizes: Sizes, figures: Figures) -> None:
    """``send_sync`` of normal messages, 8 threads, 100 B: sends/s."""
    topic = new_topic(bootstrap, 4, "Normal")
    producer = adapter_producer(bootstrap)

    def send(i: int) -> None:
        m = Message(topic)
        m.set_tags("TagA")
        m.set_keys("k1")
        m.set_body(body("n", i))
        producer.send_sync(m)

    try:
        run_threads(sizes.warm_up, lambda i: send(-1 - i), deadline_s=300)  # untimed warm-up
        n = sizes.normal
        sent = run_threads(n, send, deadline_s=max(600, n / 20))
        figures.normal = Throughput.of_sends(sent)
    finally:
        producer.shutdown()


def delays(bootstrap: str, sizes: Sizes, figures: Figures) -> None:
    """Delay levels 1 and 2 (1 s, 5 s): burst and paced; lateness against the due time."""
    forwarder = Forwarder(bootstrap)
    producer = adapter_producer(bootstrap)
    try:
        prime_partitions(bootstrap, SCHEDULE, LEVELS.max_level)
        # Untimed warm-up: a burst at level 1 through the forwarder (which joins its group).
        warm = new_topic(bootstrap, 4, "DelayWarmUp")
        reader = Keyed(bootstrap, warm, DELAY_WARM_UP, timeout_s=90)

        def warm_up(i: int) -> None:
            m = Message(warm)
            m.set_body(body("w", i))
            m.set_delay_time_level(1)
            producer.send_sync(m)

        run_threads(DELAY_WARM_UP, warm_up, deadline_s=120)
        if not reader.wait().first:
            raise RuntimeError("the schedule forwarder forwarded nothing within 90 s")

        for delay_s in sizes.delays_s:
            level = next(
                lv for lv in range(1, LEVELS.max_level + 1) if LEVELS.delay_ms(lv) == delay_s * 1000
            )
            for paced in (False, True):
                name = delay_name(delay_s, paced)
                n = sizes.delay_paced if paced else sizes.delay_burst
                pace = sizes.delay_pace if paced else 0.0
                log.info("adapter: delayed messages, %s (%d, level %d)", name, n, level)
                topic = new_topic(bootstrap, 4, "Delayed", prime=True)
                start = schedule_end_offsets(bootstrap)
                send_s = n / pace if pace else 10.0
                reader = Keyed(bootstrap, topic, n, timeout_s=send_s + delay_s + 60)

                def send(i: int, topic: str = topic, level: int = level) -> None:
                    m = Message(topic)
                    m.set_body(body("d", i))
                    m.set_delay_time_level(level)
                    producer.send_sync(m)

                sent = run_threads(n, send, deadline_s=send_s + 120, per_second=pace)
                reader.wait()
                due = due_times(bootstrap, start, sent.count)
                late = [at - due[key] for key, at in reader.first.items() if key in due]
                figures.delays[name] = Delayed(
                    sent=sent.count,
                    received=len(reader.first),
                    lateness=Latency.of(late),
                    early=sum(1 for v in late if v < 0),
                    duplicates=reader.duplicates,
                )
                if sent.errors:
                    figures.notes.append(f"adapter delay {name}: {sent.errors} send errors")
    finally:
        producer.shutdown()
        forwarder.stop()


def simple(bootstrap: str, sizes: Sizes, figures: Figures) -> None:
    """The 5.x SimpleConsumer draining a pre-filled topic, per phase (``simple_runs``)."""

    def drain(phase: str, n: int, threads: int) -> Drained:
        topic = new_topic(bootstrap, 4, f"Simple{phase}")
        filled = fill(bootstrap, topic, n)
        tally = adapter_phase(
            bootstrap, topic, n, threads, SIMPLE_BATCH, SIMPLE_INVISIBLE_S, SIMPLE_IDLE_S,
            SIMPLE_TIMEOUT_S,
        )  # fmt: skip
        return Drained.of(tally, threads, filled)

    simple_runs(sizes, figures, drain)


def push(bootstrap: str, sizes: Sizes, figures: Figures) -> None:
    """``adapter.v5.PushConsumer``, send to listener (``bench.push_consumer``)."""
    from adapter import v5

    topic = new_topic(bootstrap, 4, "Push")
    configuration = v5.ClientConfiguration(bootstrap, v5.Credentials())
    figures.push = run_push(v5, configuration, topic, f"GID_{topic}", sizes.push, sizes.push_pace)


class SeedProducer:
    """The seed's local transaction and check-back, on the drop-in ``TransactionMQProducer``."""

    def __init__(self, bootstrap: str) -> None:
        self.calls: list[tuple[str, int]] = []
        self.producer = TransactionMQProducer(f"GID_bench_seed_{uuid.uuid4().hex[:8]}", self.check)
        self.producer.set_name_server_address(bootstrap)
        self.producer.start()

    @staticmethod
    def local_execute(msg: ReceivedMessage, user_args: object) -> TransactionStatus:
        key = msg.keys.decode()
        if key in SEED_ROLLBACK:
            return TransactionStatus.ROLLBACK
        if key in SEED_UNKNOWN:
            return TransactionStatus.UNKNOWN
        return TransactionStatus.COMMIT

    def check(self, msg: ReceivedMessage) -> TransactionStatus:
        self.calls.append((msg.keys.decode(), now_ms()))
        return TransactionStatus.COMMIT


def seed(bootstrap: str, check_interval_ms: int, watch_s: float, figures: Figures) -> None:
    """Seed 004: Num0..Num9 in transactions, answers per key; deliveries per key."""
    topic = new_topic(bootstrap, 4, "Seed", prime=True)
    sender = SeedProducer(bootstrap)
    try:
        timeout_s = 6 + 2 * check_interval_ms / 1000 + 30
        reader = Keyed(bootstrap, topic, len(SEED_EXPECTED), timeout_s, watch_s, by_body=True)
        started = now_ms()
        for key in SEED_KEYS:
            m = Message(topic)
            m.set_keys(key)
            m.set_body(SEED_BODIES[key])
            sender.producer.send_message_in_transaction(m, sender.local_execute)
            time.sleep(SEED_SEND_GAP_S)
        reader.wait()
        key_of = {b: k for k, b in SEED_BODIES.items()}
        checks = [(key, (at - started) / 1000) for key, at in sender.calls]
        figures.seeds.setdefault(check_interval_ms, []).append(
            Seed(
                deliveries={key_of[b]: c for b, c in reader.deliveries.items() if b in key_of},
                checks=checks,
                first_check_s=min((s for _, s in checks), default=None),
            )
        )
    finally:
        sender.producer.shutdown()


def seeds(bootstrap: str, check_interval_ms: int, sizes: Sizes, figures: Figures) -> None:
    """``sizes.seed_runs`` seed 004 runs, each on a topic of its own."""
    for run in range(1, sizes.seed_runs + 1):
        figures.attempt(
            f"seed 004, check interval {check_interval_ms} ms, run {run} of {sizes.seed_runs}",
            lambda: seed(bootstrap, check_interval_ms, sizes.seed_watch_s, figures),
        )


def run(sizes: Sizes, figures: Figures) -> None:
    """The workloads of ``sizes.workloads`` on a Kafka broker of its own, with the adapter's
    workers (the transaction coordinator only for transactions and seed 004)."""
    logging.getLogger("adapter").setLevel(logging.WARNING)
    wanted = set(sizes.workloads)
    with kafka() as bootstrap, contextlib.ExitStack() as stack:
        log.info("adapter: Kafka broker at %s", bootstrap)
        topics.init_topics({"bootstrap.servers": bootstrap}, topics.system_layout(8, LEVELS))
        coordinator: Coordinator | None = None
        if wanted & {"transactions", "seed"}:
            coordinator = Coordinator(bootstrap, OUT, "default")
            stack.callback(coordinator.stop)
            coordinator.wait_ready()
        runs: dict[str, Callable[[], None]] = {
            "normal": lambda: normal_sends(bootstrap, sizes, figures),
            "delays": lambda: delays(bootstrap, sizes, figures),
            "simple": lambda: simple(bootstrap, sizes, figures),
            "push": lambda: push(bootstrap, sizes, figures),
        }
        if coordinator is not None:
            runs["transactions"] = lambda c=coordinator: transactions(bootstrap, c, sizes, figures)
        figures.attempt_selected(sizes, runs)
        if coordinator is not None and "seed" in wanted:
            seeds(bootstrap, DEFAULT_CHECK_INTERVAL_MS, sizes, figures)
            coordinator.stop()
            fast = Coordinator(
                bootstrap, OUT, "seed-1s", "--check-interval-ms", str(FAST_CHECK_INTERVAL_MS)
            )
            stack.callback(fast.stop)
            fast.wait_ready()
            seeds(bootstrap, FAST_CHECK_INTERVAL_MS, sizes, figures)
            fast.stop()
