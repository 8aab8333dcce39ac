"""The third column of bench/rocketmq.py: ``rmq-adapter proxy`` on Kafka, driven by the official
5.x Python client running the very workload code of the RocketMQ column
(``bench/rocketmq_apache.py``) with only the endpoint changed.

- A Kafka broker of its own with the system topics, the transaction coordinator and the schedule
  forwarder as worker processes (as the adapter column), and ``rmq-adapter proxy`` on a free
  loopback port (plaintext, the Python client's default; no auth).
- Topics are made on Kafka with 4 partitions (RocketMQ's 4 queues), each primed with an aborted
  record per partition (``bench.common.prime_partitions``, as the adapter column's latency
  topics); the proxy takes every message type on them.
- Receiving: the proxy serves producers only so far (consumers are issue 28's part 2), so each
  workload receives through a read_committed reader of the Kafka topic in a child process, by
  body (``bench.rocketmq_adapter.Keyed``, the adapter column's receiver); a timer's due time is
  its ``TIMER_DELIVER_MS``, the ``delivery_timestamp`` the client sent. The SimpleConsumer
  workload does not run on this column.
- RocketMQ's ``transactionCheckInterval`` (seed 004's second half) is the coordinator's
  ``--check-interval-ms``: the coordinator is restarted with it.
- The proxy's cost: CPU ms per message (user + system time of its process over a workload,
  divided by every message the workload sent, warm-up included) and its RSS (``VmRSS`` and the
  peak, ``VmHWM``) after each workload.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from confluent_kafka.admin import NewTopic

from adapter import naming
from adapter.kafka import clients, topics
from bench import rocketmq_apache
from bench.common import Coordinator, LoggedProcess, kafka, prime_partitions
from bench.delay import Forwarder
from bench.rocketmq_adapter import LEVELS, Keyed
from bench.rocketmq_apache import Arrivals
from bench.rocketmq_figures import SEED_KEYS, WORKLOADS, Figures, Sizes
from bench.rocketmq_server import OUT as ROCKETMQ_OUT
from bench.rocketmq_server import Topic

OUT: Path = ROCKETMQ_OUT / "proxy"
SERVING = re.compile(r"proxy serving .* on ([0-9.]+):(\d+),")
DELAY_WARM_UP = 100  # as bench.rocketmq_apache.DELAY_WARM_UP

log = logging.getLogger("bench.rocketmq")


class Proxy(LoggedProcess):
    """``rmq-adapter proxy`` as its own process on a free loopback port; its log in ``out``."""

    what = "rmq-adapter proxy"

    def __init__(self, bootstrap: str, out: Path) -> None:
        super().__init__(
            [
                *(sys.executable, "-m", "adapter", "--log-level", "INFO", "proxy"),
                *("--bootstrap", bootstrap, "--listen", "127.0.0.1:0"),
            ],
            out / "proxy.log",
        )
        self.endpoints = ""

    def wait_ready(self, timeout: float = 120) -> None:
        """Until it logged where it serves; ``endpoints`` is then that address."""
        self.wait_for(lambda text: SERVING.search(text) is not None, timeout)
        found = SERVING.search(self.log_text())
        assert found is not None
        self.endpoints = f"{found.group(1)}:{found.group(2)}"


class ProxyTarget:
    """What the workloads of ``bench.rocketmq_apache`` need of a server (its ``Target``), on
    the proxy and its Kafka."""

    def __init__(self, bootstrap: str, proxy: Proxy, coordinator: Coordinator) -> None:
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
        futures = admin.create_topics(
            [NewTopic(naming.kafka_topic(t.name), t.queues, 1) for t in new]
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
    """Every message a workload sends through the proxy, warm-up included."""
    return {
        "transactions": sizes.warm_up + sizes.tx_messages + sizes.paced,
        "normal": sizes.warm_up + sizes.normal,
        "delays": DELAY_WARM_UP + len(sizes.delays_s) * (sizes.delay_burst + sizes.delay_paced),
        "seed": 2 * sizes.seed_runs * len(SEED_KEYS),
    }[workload]


@contextlib.contextmanager
def proxy_stack(bootstrap: str) -> Iterator[ProxyTarget]:
    """The workers and the proxy on ``bootstrap``, all stopped afterwards."""
    topics.init_topics({"bootstrap.servers": bootstrap}, topics.system_layout(8, LEVELS))
    with contextlib.ExitStack() as stack:
        proxy = Proxy(bootstrap, OUT)
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
    """The workloads of ``sizes.workloads`` but the SimpleConsumer one, each through the proxy,
    with the proxy's CPU time and memory after each."""
    logging.getLogger("adapter").setLevel(logging.WARNING)
    if "simple" in sizes.workloads:
        figures.skipped.add("simple")
        figures.notes.append(
            f"{figures.system}: the SimpleConsumer workload does not run (the proxy serves "
            "producers only so far)"
        )
    with kafka() as bootstrap, proxy_stack(bootstrap) as target:
        for workload in WORKLOADS:
            if workload not in sizes.workloads or workload == "simple":
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
