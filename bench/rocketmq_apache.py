"""The Apache RocketMQ side of bench/rocketmq.py: the workloads through the official 5.x Python
client (``rocketmq-python-client``, package ``rocketmq``, pure-Python gRPC) against the proxy
that ``bench/rocketmq_server.py`` starts.

- Senders: one ``Producer`` shared by 8 threads (``bench.transactions.run_threads``), as
  applications share one. A transactional producer lists its topics (the proxy uses the topic as
  the producer group for check-backs).
- Receiver: a ``SimpleConsumer`` in a child process (so the senders do not hold its GIL; the
  adapter side reads in a child process too), created after its group exists, 1.5 s between
  ``startup()`` and the first ``receive`` (a receive right after start-up can fail with
  ``"settings" is null``). Two threads long-poll ``receive(32)``; acks go through a small thread
  pool. The time a message is received is when its ``receive`` call returned. The receive threads
  are joined before ``shutdown()`` (shutting down under an in-flight long poll has lost messages).
- SimpleConsumer workload: per phase a NORMAL topic (and group) of its own, pre-filled with
  ``Producer.send`` from 8 threads, then drained in this process by ``bench.simple_consumer.drain``
  (the loop the adapter's phase runs, here on the official ``SimpleConsumer``): 1.5 s after
  ``startup()``, ``receive(32, 30 s)`` + ``ack`` each from 1, then 4 threads sharing one consumer;
  receive errors are counted and retried. Long polls of 5 s, the proxy's least (the adapter's
  are 2 s; a poll only waits once the topic is drained, after the rate's last ack). The threads
  are joined before ``shutdown()``.
- The client's own log is moved from ``~/logs/rocketmq_python`` to ``bench/.out/rocketmq/``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

from bench.common import ChildRun, rate
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
    simple_phases,
    simple_runs,
)
from bench.rocketmq_server import OUT, Topic
from bench.simple_consumer import Tally, drain
from bench.simple_consumer import body as simple_body
from bench.transactions import run_threads

RECEIVE_THREADS = 2
RECEIVE_BATCH = 32
AWAIT_S = 3  # long-polling time of one receive
INVISIBLE_S = 30  # a received message stays invisible this long unless acknowledged
CLIENT_LOG = OUT / "python-client.log"
# The proxy long-polls at least grpcClientConsumerMinLongPollingTimeoutMillis (5 s by default) and
# refuses a receive whose gRPC deadline (request_timeout + await_duration) leaves less than that
# ("BadRequestException: 40018, The deadline time remaining is not enough for polling"): the
# SimpleConsumer workload's await of 2 s (bench.simple_consumer.AWAIT_S) is 5 s here anyway.
PROXY_MIN_AWAIT_S = 5

log = logging.getLogger("bench.rocketmq")

# Topics (4 queues each, as the adapter's 4 partitions) and the consumer group of each.
TX_WARM = Topic("BenchTxWarmUp", "TRANSACTION")
TX_LOAD = Topic("BenchTxLoad", "TRANSACTION")
TX_PACED = Topic("BenchTxPaced", "TRANSACTION")
NORMAL = Topic("BenchNormal", "NORMAL")
DELAY_WARM = Topic("BenchDelayWarmUp", "DELAY")
DELAY_WARM_UP = 100  # delayed messages at +1 s through the timer wheel before the timed runs
SEED_INTERVALS = (DEFAULT_CHECK_INTERVAL_MS, FAST_CHECK_INTERVAL_MS)


def seed_topic(check_interval_ms: int, run: int) -> Topic:
    """A topic (and group) of its own per run: a late duplicate stays in its run."""
    kind = "Default" if check_interval_ms == DEFAULT_CHECK_INTERVAL_MS else "Fast"
    return Topic(f"BenchSeed{kind}{run}", "TRANSACTION")


def simple_topic(phase: str) -> Topic:
    return Topic(f"BenchSimple{phase}", "NORMAL")


def delay_topic(name: str) -> Topic:
    return Topic("BenchDelay" + name.replace(" ", ""), "DELAY")


PUSH = Topic("BenchPush", "NORMAL")


def group_of(topic: Topic) -> str:
    return f"GID_{topic.name}"


def all_topics(sizes: Sizes) -> list[Topic]:
    delays = [delay_topic(delay_name(d, p)) for d in sizes.delays_s for p in (False, True)]
    seeds = [seed_topic(i, run) for i in SEED_INTERVALS for run in range(1, sizes.seed_runs + 1)]
    simple = [simple_topic(phase) for phase, *_ in simple_phases(sizes)]
    return [TX_WARM, TX_LOAD, TX_PACED, NORMAL, DELAY_WARM, *delays, *simple, PUSH, *seeds]


def quiet_client_log(path: Path = CLIENT_LOG) -> None:
    """The 5.x client logs to ``~/logs/rocketmq_python`` (set up at import); log to ``path``."""
    client = logging.getLogger("rocketmq-python-client")
    for handler in list(client.handlers):
        client.removeHandler(handler)
        handler.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d [%(levelname)s] %(message)s"))
    client.addHandler(handler)
    client.setLevel(logging.WARNING)


def configuration(endpoints: str) -> ClientConfiguration:
    return ClientConfiguration(endpoints, Credentials(), request_timeout=3)


# -- the receiver, in a child process ----------------------------------------------------------


@dataclass(slots=True)
class Arrivals:
    """What a receiver saw: first arrival (epoch ms), deliveries and due time per body."""

    first: dict[bytes, int] = field(default_factory=dict)
    deliveries: Counter[bytes] = field(default_factory=Counter)
    due: dict[bytes, int] = field(default_factory=dict)  # delivery_timestamp, ms
    errors: int = 0
    first_error: str | None = None

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.deliveries.values())


def _receive(
    endpoints: str,
    topic: str,
    group: str,
    prefix: bytes,
    n: int,
    timeout_s: float,
    linger_s: float,
    ready: Any,
    out: Any,
) -> None:
    """Receive until ``n`` distinct bodies starting with ``prefix`` arrived (or the deadline),
    then ``linger_s`` more for duplicates; put the ``Arrivals`` on ``out``."""
    quiet_client_log()
    consumer = SimpleConsumer(
        configuration(endpoints), group, {topic: FilterExpression()}, await_duration=AWAIT_S
    )
    consumer.startup()
    seen = Arrivals()
    lock = threading.Lock()
    enough = threading.Event()
    stop = threading.Event()
    acks = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="ack")
    counted = 0

    def loop() -> None:
        nonlocal counted
        while not stop.is_set():
            try:
                batch = consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
            except Exception as exc:  # noqa: BLE001 - counted; the loop has a deadline
                with lock:
                    seen.errors += 1
                    seen.first_error = seen.first_error or f"{type(exc).__name__}: {exc}"
                stop.wait(0.2)
                continue
            at = now_ms()
            with lock:
                for m in batch or ():
                    b = bytes(m.body)
                    seen.deliveries[b] += 1
                    if b not in seen.first:
                        seen.first[b] = at
                        counted += b.startswith(prefix)
                    if m.delivery_timestamp:
                        seen.due[b] = int(m.delivery_timestamp)
                if counted >= n:
                    enough.set()
            for m in batch or ():
                acks.submit(consumer.ack, m).add_done_callback(acked)

    def acked(future: concurrent.futures.Future[None]) -> None:
        exc = future.exception()
        if exc is not None:  # the message comes again after INVISIBLE_S: a duplicate
            with lock:
                seen.errors += 1
                seen.first_error = seen.first_error or f"ack: {type(exc).__name__}: {exc}"

    try:
        time.sleep(1.5)  # the proxy registers the client's settings first
        threads = [threading.Thread(target=loop, daemon=True) for _ in range(RECEIVE_THREADS)]
        for t in threads:
            t.start()
        ready.put(True)
        if enough.wait(timeout_s):
            time.sleep(linger_s)
        stop.set()
        for t in threads:
            t.join(AWAIT_S + 10)
        acks.shutdown(wait=True)
    finally:
        consumer.shutdown()
    with lock:
        out.put(seen)


class Receiver:
    """A ``SimpleConsumer`` of ``topic`` in a child process, receiving from before the first
    message is sent."""

    def __init__(
        self,
        endpoints: str,
        topic: Topic,
        prefix: bytes,
        n: int,
        timeout_s: float,
        linger_s: float = 1.0,
    ) -> None:
        self._wait_s = timeout_s + linger_s + AWAIT_S + 60
        self._child = ChildRun(
            _receive,
            (endpoints, topic.name, group_of(topic), prefix, n, timeout_s, linger_s),
            f"the receiver of {topic.name}",
            start_within_s=60,
        )

    def wait(self) -> Arrivals:
        seen: Arrivals = self._child.result(self._wait_s)
        if seen.errors:
            log.debug("receiver: %d receive errors, first: %s", seen.errors, seen.first_error)
        return seen


# -- the workloads -----------------------------------------------------------------------------


class Target(Protocol):
    """Where the workloads run: an endpoint of RocketMQ's 5.x protocol (Apache RocketMQ's proxy,
    ``bench.rocketmq_server.RocketMQ``, or ``rmq-adapter proxy``, ``bench.rocketmq_proxy``)."""

    @property
    def endpoints(self) -> str: ...

    def create_topics(self, topics: Sequence[Topic]) -> None: ...

    def create_groups(self, groups: Sequence[str]) -> None: ...

    def set_broker_config(self, key: str, value: str) -> None: ...


class Receiving(Protocol):
    def wait(self) -> Arrivals: ...


Receive = Callable[..., Receiving]
"""``receive(topic, prefix, n, timeout_s=..., linger_s=1.0)``: a receiver of ``topic`` started
before the first message is sent (as :class:`Receiver`)."""


class CommitChecker(TransactionChecker):
    """Answers COMMIT; notes each check-back (key, epoch ms)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def check(self, message: Message) -> TransactionResolution:
        self.calls.append((",".join(sorted(message.keys)), now_ms()))
        return TransactionResolution.COMMIT


def _started(producer: Producer) -> Producer:
    producer.startup()
    return producer


def transactions(server: Target, sizes: Sizes, figures: Figures, receive: Receive) -> None:
    """Throughput (8 threads, 100 B, committed end to end) and paced commit-to-visible."""
    checker = CommitChecker()
    producer = _started(
        Producer(
            configuration(server.endpoints), (TX_WARM.name, TX_LOAD.name, TX_PACED.name), checker
        )
    )
    committed: dict[bytes, int] = {}
    commit_called: dict[bytes, int] = {}

    def send(topic: Topic, payload: bytes) -> None:
        m = Message()
        m.topic = topic.name
        m.body = payload
        tx = producer.begin_transaction()
        producer.send(m, tx)
        called = now_ms()
        tx.commit()
        committed[payload] = now_ms()
        commit_called[payload] = called

    try:
        # Untimed warm-up through a receiver of its own: the JVM's JIT, routes, connections.
        w = sizes.warm_up
        log.info("%s: warm-up, %d transactions (untimed)", figures.system, w)
        receiver = receive(TX_WARM, b"w:", w, timeout_s=max(120.0, w / 20))
        run_threads(w, lambda i: send(TX_WARM, body("w", i)), deadline_s=max(300, w / 10))
        receiver.wait()
        checks_before = len(checker.calls)

        n = sizes.tx_messages
        log.info("%s: transactional throughput, %d messages from 8 threads", figures.system, n)
        receiver = receive(TX_LOAD, b"t:", n, timeout_s=max(180.0, n / 50))
        sent = run_threads(n, lambda i: send(TX_LOAD, body("t", i)), deadline_s=max(600, n / 20))
        seen = receiver.wait()
        got = {b: at for b, at in seen.first.items() if b.startswith(b"t:")}
        figures.tx = Throughput.end_to_end(sent, got, n)
        figures.tx_under_load = Latency.of([at - committed[b] for b, at in got.items()])
        if sent.first_error:
            figures.notes.append(f"{figures.system} transactional sends: {sent.first_error}")
        checks = len(checker.calls) - checks_before
        if seen.duplicates or checks:
            figures.notes.append(
                f"{figures.system} transactional throughput: {seen.duplicates} duplicate "
                "deliveries, "
                f"{checks} check-backs (all messages were committed at once)"
            )

        committed.clear()
        commit_called.clear()
        n, pace = sizes.paced, sizes.pace
        log.info("%s: commit-to-visible, %d messages at %.0f/s", figures.system, n, pace)
        receiver = receive(TX_PACED, b"l:", n, timeout_s=n / pace + 120)
        run_threads(
            n,
            lambda i: send(TX_PACED, body("l", i)),
            deadline_s=n / pace + 120,
            per_second=pace,
        )
        seen = receiver.wait()
        got = {b: at for b, at in seen.first.items() if b in committed}
        figures.tx_paced = Latency.of([at - committed[b] for b, at in got.items()])
        figures.tx_paced_from_call = Latency.of([at - commit_called[b] for b, at in got.items()])
        if len(got) < n:
            figures.notes.append(
                f"{figures.system} paced transactions: {n - len(got)} of {n} not seen"
            )
    finally:
        producer.shutdown()


def normal_sends(server: Target, sizes: Sizes, figures: Figures) -> None:
    """Sync sends of normal messages, 8 threads, 100 B: sends/s."""
    producer = _started(Producer(configuration(server.endpoints), (NORMAL.name,)))

    def send(i: int) -> None:
        m = Message()
        m.topic = NORMAL.name
        m.body = body("n", i)
        m.tag = "TagA"
        m.keys = "k1"
        producer.send(m)

    try:
        run_threads(sizes.warm_up, lambda i: send(-1 - i), deadline_s=300)  # untimed warm-up
        n = sizes.normal
        sent = run_threads(n, send, deadline_s=max(600, n / 20))
        figures.normal = Throughput.of_sends(sent)
    finally:
        producer.shutdown()


def delays(server: Target, sizes: Sizes, figures: Figures, receive: Receive) -> None:
    """Delayed messages (``delivery_timestamp``, whole seconds): burst and paced, per delay."""
    names = [(d, p, delay_name(d, p)) for d in sizes.delays_s for p in (False, True)]
    producer = _started(
        Producer(
            configuration(server.endpoints),
            [DELAY_WARM.name, *(delay_topic(name).name for *_, name in names)],
        )
    )
    try:
        # Untimed warm-up: a burst at +1 s through the timer wheel.
        receiver = receive(DELAY_WARM, b"w:", DELAY_WARM_UP, timeout_s=90)

        def warm(i: int) -> None:
            m = Message()
            m.topic = DELAY_WARM.name
            m.body = body("w", i)
            m.delivery_timestamp = math.ceil(time.time() + 1)
            producer.send(m)

        run_threads(DELAY_WARM_UP, warm, deadline_s=120)
        receiver.wait()
        for delay_s, paced, name in names:
            topic = delay_topic(name)
            n = sizes.delay_paced if paced else sizes.delay_burst
            pace = sizes.delay_pace if paced else 0.0

            def send(i: int, topic: Topic = topic, delay_s: int = delay_s) -> None:
                m = Message()
                m.topic = topic.name
                m.body = body("d", i)
                # Whole seconds on the wire: due at the first whole second >= now + delay.
                m.delivery_timestamp = math.ceil(time.time() + delay_s)
                producer.send(m)

            log.info("%s: delayed messages, %s (%d)", figures.system, name, n)
            send_s = n / pace if pace else 10.0
            receiver = receive(topic, b"d:", n, timeout_s=send_s + delay_s + 60)
            sent = run_threads(n, send, deadline_s=send_s + 120, per_second=pace)
            seen = receiver.wait()
            late = [at - seen.due[b] for b, at in seen.first.items() if b in seen.due]
            figures.delays[name] = Delayed(
                sent=sent.count,
                received=len(seen.first),
                lateness=Latency.of(late),
                early=sum(1 for v in late if v < 0),
                duplicates=seen.duplicates,
            )
            if sent.errors:
                figures.notes.append(f"{figures.system} delay {name}: {sent.errors} send errors")
    finally:
        producer.shutdown()


def simple_message(topic: Topic, i: int) -> Message:
    """As ``bench.simple_consumer.message``: body ``i`` (100 B), tag TagA."""
    m = Message()
    m.topic = topic.name
    m.body = simple_body(i)
    m.tag = "TagA"
    return m


def simple(server: Target, sizes: Sizes, figures: Figures) -> None:
    """The official SimpleConsumer draining a pre-filled topic, per phase (``simple_runs``)."""

    def drain_phase(phase: str, n: int, threads: int) -> Drained:
        topic = simple_topic(phase)
        producer = _started(Producer(configuration(server.endpoints), (topic.name,)))
        try:
            sent = run_threads(
                n, lambda i: producer.send(simple_message(topic, i)), deadline_s=max(300, n / 10)
            )
        finally:
            producer.shutdown()
        if sent.count < n:
            raise RuntimeError(f"pre-fill: {sent.count} of {n} sent; {sent.first_error}")
        consumer = SimpleConsumer(
            configuration(server.endpoints),
            group_of(topic),
            {topic.name: FilterExpression()},
            await_duration=PROXY_MIN_AWAIT_S,
        )
        tally = Tally(n)  # from here, as the adapter's phase counts its startup()
        consumer.startup()
        try:
            time.sleep(1.5)  # the proxy registers the client's settings first
            drain(
                consumer, tally, threads, SIMPLE_BATCH, SIMPLE_INVISIBLE_S, SIMPLE_IDLE_S,
                SIMPLE_TIMEOUT_S, refused=Exception, retried=(Exception,),
            )  # fmt: skip
        finally:
            consumer.shutdown()
        return Drained.of(tally, threads, rate(sent.count, sent.seconds))

    simple_runs(sizes, figures, drain_phase)


def push(server: Target, sizes: Sizes, figures: Figures) -> None:
    """The official PushConsumer, send to listener (``bench.push_consumer``)."""
    import rocketmq

    figures.push = run_push(
        rocketmq, configuration(server.endpoints), PUSH.name, group_of(PUSH), sizes.push,
        sizes.push_pace,
    )  # fmt: skip


def seed(
    server: Target,
    check_interval_ms: int,
    run: int,
    watch_s: float,
    figures: Figures,
    receive: Receive,
) -> None:
    """Seed 004: Num0..Num9 in transactions, answers per key; deliveries per key. The broker
    must run with ``check_interval_ms`` already."""
    topic = seed_topic(check_interval_ms, run)
    checker = CommitChecker()
    producer = _started(Producer(configuration(server.endpoints), (topic.name,), checker))
    try:
        # The first check comes after transactionTimeOut (6 s) at the check service's next run
        # (every transactionCheckInterval), so up to about 6 s + one interval.
        timeout_s = 6 + 2 * check_interval_ms / 1000 + 30
        receiver = receive(topic, b"Hello", len(SEED_EXPECTED), timeout_s, linger_s=watch_s)
        started = now_ms()
        for key in SEED_KEYS:
            m = Message()
            m.topic = topic.name
            m.body = SEED_BODIES[key]
            m.keys = key
            tx = producer.begin_transaction()
            producer.send(m, tx)
            if key in SEED_ROLLBACK:
                tx.rollback()
            elif key not in SEED_UNKNOWN:
                tx.commit()
            # UNKNOWN: neither; the broker checks back later.
            time.sleep(SEED_SEND_GAP_S)
        seen = receiver.wait()
        key_of = {b: k for k, b in SEED_BODIES.items()}
        checks = [(key, (at - started) / 1000) for key, at in checker.calls]
        figures.seeds.setdefault(check_interval_ms, []).append(
            Seed(
                deliveries={key_of[b]: n for b, n in seen.deliveries.items() if b in key_of},
                checks=checks,
                first_check_s=min((s for _, s in checks), default=None),
            )
        )
    finally:
        producer.shutdown()


def run(server: Target, sizes: Sizes, figures: Figures, receive: Receive | None = None) -> None:
    """The workloads of ``sizes.workloads`` against the running ``server``, in the table's order
    (the seed runs last: the second one changes the broker's check interval). ``receive``: how
    a workload receives what it sent (default: the official ``SimpleConsumer`` through the
    server's endpoint, :class:`Receiver`)."""
    receive = receive or functools.partial(Receiver, server.endpoints)
    quiet_client_log()
    topics = all_topics(sizes)
    server.create_topics(topics)
    server.create_groups([group_of(t) for t in topics if t is not NORMAL])
    figures.attempt_selected(
        sizes,
        {
            "transactions": lambda: transactions(server, sizes, figures, receive),
            "normal": lambda: normal_sends(server, sizes, figures),
            "delays": lambda: delays(server, sizes, figures, receive),
            "simple": lambda: simple(server, sizes, figures),
            "push": lambda: push(server, sizes, figures),
        },
    )
    for interval in SEED_INTERVALS if "seed" in sizes.workloads else ():
        if interval != DEFAULT_CHECK_INTERVAL_MS:
            figures.attempt(
                f"transactionCheckInterval {interval} ms (mqadmin updateBrokerConfig)",
                lambda interval=interval: server.set_broker_config(
                    "transactionCheckInterval", str(interval)
                ),
            )
        for run in range(1, sizes.seed_runs + 1):
            figures.attempt(
                f"seed 004, check interval {interval} ms, run {run} of {sizes.seed_runs}",
                lambda interval=interval, run=run: seed(
                    server, interval, run, sizes.seed_watch_s, figures, receive
                ),
            )
