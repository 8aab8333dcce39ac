"""The third column of bench/rocketmq.py: ``rmq-adapter proxy`` on Kafka, driven by the official
5.x Python client running the very workload code of the RocketMQ column
(``bench/rocketmq_apache.py``) with only the endpoint changed.

- A Kafka broker of its own with the system topics, the transaction coordinator and the schedule
  forwarder as worker processes (as the adapter column), and ``rmq-adapter proxy`` on a free
  loopback port (plaintext, the Python client's default; no auth).
- Topics are made on Kafka with 4 partitions (RocketMQ's 4 queues), each primed with an aborted
  record per partition (``bench.common.prime_partitions``, as the adapter column's latency
  topics); the proxy takes every message type on them.
- Receiving: the sending workloads receive through a read_committed reader of the Kafka topic
  in a child process, by body (``bench.rocketmq_adapter.Keyed``, the adapter column's receiver),
  so that their figures measure the proxy's sending side alone; a timer's due time is its
  ``TIMER_DELIVER_MS``, the ``delivery_timestamp`` the client sent. The SimpleConsumer workload
  is the RocketMQ column's own: the official ``SimpleConsumer`` receiving and acking through the
  proxy.
- RocketMQ's ``transactionCheckInterval`` (seed 004's second half) is the coordinator's
  ``--check-interval-ms``: the coordinator is restarted with it.
- ``python -m bench.rocketmq_proxy [N]``: one thread's sync send latency through the proxy, then
  N sends from 8 threads, and where a send's time goes (``send_latency``).
- The proxy's cost: CPU ms per message (user + system time of its process over a workload,
  divided by every message the workload sent, warm-up included) and its RSS (``VmRSS`` and the
  peak, ``VmHWM``) after each workload.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from confluent_kafka.admin import NewTopic

from adapter import naming
from adapter.kafka import clients, topics
from bench import rocketmq_apache
from bench.common import (
    Coordinator,
    LoggedProcess,
    free_port,
    kafka,
    prime_partitions,
    transactional_topic_configs,
)
from bench.delay import Forwarder
from bench.rocketmq_adapter import LEVELS, Keyed
from bench.rocketmq_apache import Arrivals
from bench.rocketmq_figures import SEED_KEYS, WORKLOADS, Figures, Sizes, simple_phases
from bench.rocketmq_server import OUT as ROCKETMQ_OUT
from bench.rocketmq_server import Topic

OUT: Path = ROCKETMQ_OUT / "proxy"
SERVING = re.compile(r"proxy serving .* on ([0-9.]+):(\d+),")
DELAY_WARM_UP = 100  # as bench.rocketmq_apache.DELAY_WARM_UP

log = logging.getLogger("bench.rocketmq")


class Proxy(LoggedProcess):
    """``rmq-adapter proxy`` as its own process on ``listen`` (default a free loopback port);
    its log in ``out``."""

    what = "rmq-adapter proxy"

    def __init__(
        self, bootstrap: str, out: Path, listen: str = "127.0.0.1:0", *extra: str, name: str = ""
    ) -> None:
        super().__init__(
            [
                *(sys.executable, "-m", "adapter", "--log-level", "INFO", "proxy"),
                *("--bootstrap", bootstrap, "--listen", listen, *extra),
            ],
            out / f"proxy{name}.log",
        )
        self.endpoints = ""

    def wait_ready(self, timeout: float = 120) -> None:
        """Until it logged where it serves; ``endpoints`` is then that address."""
        self.wait_for(lambda text: SERVING.search(text) is not None, timeout)
        found = SERVING.search(self.log_text())
        assert found is not None
        self.endpoints = f"{found.group(1)}:{found.group(2)}"


class Proxies:
    """``count`` proxy processes sharing one loopback port (``--reuse-port``: the kernel spreads
    the clients' connections over them), seen as one: their CPU time and memory summed."""

    def __init__(self, bootstrap: str, out: Path, count: int, *extra: str) -> None:
        if count == 1:
            self.members = [Proxy(bootstrap, out, "127.0.0.1:0", *extra)]
        else:
            listen = f"127.0.0.1:{free_port()}"
            self.members = [
                Proxy(bootstrap, out, listen, "--reuse-port", *extra, name=f"-{i}")
                for i in range(count)
            ]

    @property
    def endpoints(self) -> str:
        return self.members[0].endpoints

    def wait_ready(self, timeout: float = 120) -> None:
        for member in self.members:
            member.wait_ready(timeout)

    def cpu_seconds(self) -> float:
        return sum(member.cpu_seconds() for member in self.members)

    def memory_kb(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for member in self.members:
            for name, kb in member.memory_kb().items():
                total[name] = total.get(name, 0) + kb
        return total

    def alive(self) -> bool:
        return all(member.alive() for member in self.members)

    def tail(self) -> str:
        return "\n".join(member.tail() for member in self.members)

    def problems(self) -> list[str]:
        return [line for member in self.members for line in member.problems()]

    def stop(self) -> None:
        for member in self.members:
            member.stop()


class ProxyTarget:
    """What the workloads of ``bench.rocketmq_apache`` need of a server (its ``Target``), on
    the proxy and its Kafka."""

    def __init__(self, bootstrap: str, proxy: Proxies, coordinator: Coordinator) -> None:
        self.bootstrap = bootstrap
        self.proxy = proxy
        self.coordinator = coordinator
        self._made: set[str] = set()

    @property
    def endpoints(self) -> str:
        return self.proxy.endpoints

    def create_topics(self, wanted: Sequence[Topic]) -> None:
        """Each topic not made yet, with its queues as partitions, primed."""
        new = [t for t in wanted if t.name not in self._made]
        if not new:
            return
        admin = clients.admin({"bootstrap.servers": self.bootstrap})
        fenced = transactional_topic_configs()
        futures = admin.create_topics(
            [
                NewTopic(
                    naming.kafka_topic(t.name),
                    t.queues,
                    1,
                    config=fenced if t.message_type == "TRANSACTION" else {},
                )
                for t in new
            ]
        )
        for future in futures.values():
            future.result(timeout=30)
        for t in new:
            prime_partitions(self.bootstrap, naming.kafka_topic(t.name), t.queues)
            self._made.add(t.name)

    def create_groups(self, groups: Sequence[str]) -> None:
        """Nothing to do: a Kafka consumer group needs no creation."""

    def set_broker_config(self, key: str, value: str) -> None:
        """``transactionCheckInterval``: the coordinator restarted with that check interval."""
        if key != "transactionCheckInterval":
            raise ValueError(f"the proxy's column has no broker setting {key}")
        self.coordinator.stop()
        self.coordinator = Coordinator(
            self.bootstrap, OUT, f"check-{value}", "--check-interval-ms", value
        )
        self.coordinator.wait_ready()

    def receiver(
        self, topic: Topic, prefix: bytes, n: int, timeout_s: float, linger_s: float = 1.0
    ) -> KafkaReceiver:
        """A workload's receiver (``bench.rocketmq_apache.Receive``); the topic holds only the
        workload's messages, so ``prefix`` needs no filtering."""
        return KafkaReceiver(self.bootstrap, topic, n, timeout_s, linger_s)


class KafkaReceiver:
    """A workload's receiver on this column: ``Keyed`` by body, as ``Arrivals``."""

    def __init__(
        self, bootstrap: str, topic: Topic, n: int, timeout_s: float, linger_s: float
    ) -> None:
        self._keyed = Keyed(bootstrap, topic.name, n, timeout_s, linger_s, by_body=True)

    def wait(self) -> Arrivals:
        keyed = self._keyed.wait()
        return Arrivals(first=keyed.first, deliveries=keyed.deliveries, due=keyed.due)


def messages_sent(workload: str, sizes: Sizes) -> int:
    """Every message a workload sends through the proxy, warm-up included (the SimpleConsumer
    workload's are each sent and received through it)."""
    if workload == "simple":
        return sum(n for _, n, _ in simple_phases(sizes))
    if workload == "push":
        return sizes.push + 1
    return {
        "transactions": sizes.warm_up + sizes.tx_messages + sizes.paced,
        "normal": sizes.warm_up + sizes.normal,
        "delays": DELAY_WARM_UP + len(sizes.delays_s) * (sizes.delay_burst + sizes.delay_paced),
        "seed": 2 * sizes.seed_runs * len(SEED_KEYS),
    }[workload]


@contextlib.contextmanager
def proxy_stack(
    bootstrap: str, processes: int = 1, plaintext: bool = False, *extra: str
) -> Iterator[ProxyTarget]:
    """The workers and ``processes`` proxies on ``bootstrap`` (``--plaintext`` ones if
    ``plaintext``; ``extra`` options), all stopped afterwards."""
    topics.init_topics({"bootstrap.servers": bootstrap}, topics.system_layout(8, LEVELS))
    with contextlib.ExitStack() as stack:
        options = [*(["--plaintext"] if plaintext else []), *extra]
        proxy = Proxies(bootstrap, OUT, processes, *options)
        stack.callback(proxy.stop)
        target = ProxyTarget(bootstrap, proxy, Coordinator(bootstrap, OUT, "default"))
        stack.callback(lambda: target.coordinator.stop())  # the last one started
        forwarder = Forwarder(bootstrap)
        stack.callback(forwarder.stop)
        target.coordinator.wait_ready()
        proxy.wait_ready()
        log.info("proxy: serving on %s, Kafka at %s", proxy.endpoints, bootstrap)
        yield target


def run(sizes: Sizes, figures: Figures) -> None:
    """The workloads of ``sizes.workloads``, each through the proxy, with the proxy's CPU time
    and memory after each."""
    logging.getLogger("adapter").setLevel(logging.WARNING)
    if sizes.proxies > 1:
        figures.notes.append(f"{figures.system}: {sizes.proxies} proxy processes on one port")
    if sizes.proxy_plaintext:
        figures.notes.append(f"{figures.system}: `--plaintext` (gRPC on the port, no TLS)")
    with (
        kafka() as bootstrap,
        proxy_stack(bootstrap, sizes.proxies, sizes.proxy_plaintext) as target,
    ):
        for workload in WORKLOADS:
            if workload not in sizes.workloads:
                continue
            before = target.proxy.cpu_seconds()
            rocketmq_apache.run(
                target, replace(sizes, workloads=(workload,)), figures, target.receiver
            )
            spent_ms = (target.proxy.cpu_seconds() - before) * 1000
            figures.cpu_ms_per_message[workload] = spent_ms / messages_sent(workload, sizes)
            figures.memory_kb[workload] = target.proxy.memory_kb()
            if not target.proxy.alive():
                raise RuntimeError(f"the proxy died:\n{target.proxy.tail()}")
        problems = target.proxy.problems()
        if problems:
            figures.notes.append(
                f"{figures.system}: {len(problems)} warnings or errors in its log, first: "
                f"{problems[0][:300]}"
            )


# -- python -m bench.rocketmq_proxy: one sync send's latency ---------------------------------


def send_latency(sends: int) -> None:
    """One thread's sync sends through the proxy (the official client, 100 B, after as many
    untimed ones): p50 / p99 ms; then ``sends`` from 8 threads: sends/s, and where a send's
    time goes: the client's round trip, the proxy's ``SendMessage`` handler (its mean, from its
    ``/metrics``), and the CPU ms per send of the proxy and of this client process.
    ``RMQ_ADAPTER_KAFKA_LINGER_MS`` in the environment overrides the proxy's producer linger
    (1 ms)."""
    from rocketmq import Message, Producer

    from bench.rocketmq_figures import Latency, body
    from bench.transactions import run_threads

    rocketmq_apache.quiet_client_log()
    topic = Topic("LatencyNormal", "NORMAL")
    metrics_port = free_port()
    with (
        kafka() as bootstrap,
        proxy_stack(bootstrap, 1, False, "--metrics-port", str(metrics_port)) as target,
    ):
        target.create_topics([topic])
        producer = Producer(rocketmq_apache.configuration(target.endpoints), (topic.name,))
        producer.startup()

        def send(i: int) -> None:
            m = Message()
            m.topic = topic.name
            m.body = body("n", i)
            producer.send(m)

        try:
            for i in range(sends):
                send(-1 - i)  # untimed warm-up
            took = []
            for i in range(sends):
                started = time.perf_counter()
                send(i)
                took.append((time.perf_counter() - started) * 1000)
            one = Latency.of(took)
            cpu, mine, handled = target.proxy.cpu_seconds(), _own_cpu_s(), _handled(metrics_port)
            sent = run_threads(sends, send, deadline_s=max(120, sends / 20))
            per_send = (target.proxy.cpu_seconds() - cpu) * 1000 / max(sent.count, 1)
            client = (_own_cpu_s() - mine) * 1000 / max(sent.count, 1)
            seconds, count = (a - b for a, b in zip(_handled(metrics_port), handled, strict=True))
        finally:
            producer.shutdown()
    rate = sent.count / sent.seconds
    linger = os.environ.get("RMQ_ADAPTER_KAFKA_LINGER_MS", "default (1)")
    print(f"proxy sync sends, linger.ms {linger}, {sends} each:")
    print(f"  1 thread: p50 / p99 / max {one.cell() if one else '-'} ms")
    handler = seconds * 1000 / max(count, 1)
    print(f"  8 threads: {rate:,.0f}/s; round trip {8000 / rate:.2f} ms, handler {handler:.2f} ms")
    print(f"  CPU ms a send: proxy {per_send:.2f}, client {client:.2f}")


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _handled(metrics_port: int) -> tuple[float, float]:
    """The proxy's ``SendMessage`` handler seconds and calls so far, from its ``/metrics``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = [
        re.search(rf'rmq_proxy_rpc_seconds_{part}{{method="SendMessage"}} (\S+)', text)
        for part in ("sum", "count")
    ]
    seconds, count = (float(f.group(1)) if f else 0.0 for f in found)
    return seconds, count


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    send_latency(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
