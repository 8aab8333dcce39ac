"""Shared benchmark plumbing: a broker to measure against, topics, and a result table."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import platform
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from adapter import naming
from adapter.kafka import clients
from adapter.kafka.topics import DIRECT_COMMIT
from adapter.ops import broker

ROOT = Path(__file__).resolve().parent.parent
GROUP_COMMIT_ENV = "RMQ_BENCH_GROUP_COMMIT"
"""Set to 1 (``bench.rocketmq --group-commit``): transactional topics without the direct
commit's fence, so that COMMITs go through the producers' Kafka transactions as before."""


def transactional_topic_configs() -> dict[str, str]:
    """The configs of a benchmark's transactional topics: made for direct commits, as
    ``rmq-adapter topics create --direct-commit`` makes them, unless ``GROUP_COMMIT_ENV``."""
    return {} if os.environ.get(GROUP_COMMIT_ENV) == "1" else dict(DIRECT_COMMIT)


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


def new_topic(
    bootstrap: str,
    partitions: int = 4,
    prefix: str = "Bench",
    *,
    prime: bool = False,
    configs: dict[str, str] | None = None,
) -> str:
    """A new topic with ``configs``; ``prime``: with each partition's first append done
    (:func:`prime_partitions`)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = clients.admin({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, 1, config=configs or {})
    for future in admin.create_topics([topic]).values():
        future.result(timeout=30)
    if prime:
        prime_partitions(bootstrap, name, partitions)
    return name


def prime_partitions(bootstrap: str, topic: str, partitions: int) -> None:
    """Append one record to each partition of ``topic`` (a Kafka name) in a transaction, and
    abort it, so that a measurement does not pay the first append to a partition.

    Kafka writes and fsyncs a partition's leader-epoch checkpoint on the request thread at its
    first append (``LeaderEpochFileCache.assign``): on this machine's ext4 disk the first send
    to a delay level took 41.6 ms of the broker's local time (its request log), against under
    1 ms for the next. A production topic pays that once in its life; a benchmark's topic made
    seconds before would pay it inside the measurement. An aborted record is invisible to the
    read_committed readers (and the forwarder) here."""
    producer = clients.producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-prime-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(partitions):
        producer.produce(topic, b"", partition=partition)
    producer.flush(30)
    producer.abort_transaction(30)


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


def worker_command(
    kind: str, bootstrap: str, worker_id: str, *options: str, log_level: str = "WARNING"
) -> list[str]:
    """The argv of ``rmq-adapter worker KIND`` as its own process, as in production."""
    return [
        sys.executable,
        "-m",
        "adapter",
        "--log-level",
        log_level,
        "worker",
        kind,
        "--bootstrap",
        bootstrap,
        "--worker-id",
        worker_id,
        *options,
    ]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


class LoggedProcess:
    """An ``rmq-adapter`` process of the benchmark's own, its output in a log file; what it
    costs (CPU time, memory) read from ``/proc``; stopped with SIGTERM."""

    what = "process"

    def __init__(self, argv: list[str], log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv
            argv,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_for(self, ready: Callable[[str], bool], timeout: float = 120) -> None:
        """Until ``ready(its log so far)``; raises if it exits or the deadline passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready(self.log_text()):
                return
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.what} exited with {self.process.returncode}:\n{self.tail()}"
                )
            time.sleep(0.2)
        raise RuntimeError(f"{self.what} not ready after {timeout:.0f} s:\n{self.tail()}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def memory_kb(self) -> dict[str, int]:
        """VmRSS and VmHWM (its peak RSS) of the process, in KiB."""
        found = {}
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
        return found

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def problems(self) -> list[str]:
        """WARNING and ERROR lines of its log (JSON lines)."""
        return [
            line
            for line in self.log_text().splitlines()
            if '"level": "ERROR"' in line or '"level": "WARNING"' in line or "Traceback" in line
        ]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                print(f"{self.what} {self.process.pid} ignored SIGTERM for 60 s; killing it")
                self.process.kill()
                self.process.wait(30)
        self._log.close()


class Coordinator(LoggedProcess):
    """``rmq-adapter worker transactions`` as its own process, as in production; its log in
    ``out``."""

    what = "coordinator"

    def __init__(self, bootstrap: str, out: Path, name: str, *options: str) -> None:
        self.worker_id = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        super().__init__(
            worker_command("transactions", bootstrap, self.worker_id, *options, log_level="INFO"),
            out / f"coordinator-{name}.log",
        )

    def wait_ready(self, timeout: float = 120) -> None:
        """Until it logged its start ("starting", "started" before 2026-11-25) and took its
        partitions."""
        started = f"transaction coordinator {self.worker_id} start"
        self.wait_for(lambda text: started in text and "coordinating partitions" in text, timeout)


def wait_started(child: Any, ready: Any, what: str, within_s: float) -> None:
    """Wait until child process ``child`` puts anything on ``ready``; kill it and raise if it
    dies or takes longer than ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            ready.get(timeout=1)
            return
        except queue.Empty:
            if not child.is_alive() or time.monotonic() > deadline:
                child.kill()
                raise RuntimeError(f"{what} did not start") from None


class ChildRun:
    """``target(*args, ready, out)`` in a child process of its own (spawned: no fork of a
    process running librdkafka), so that what it measures shares no GIL with the senders;
    started once the child puts anything on ``ready``. :meth:`result` is what it puts on
    ``out``; the child is killed if it outstays that."""

    def __init__(
        self,
        target: Callable[..., None],
        args: tuple[Any, ...],
        what: str,
        start_within_s: float = 120,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        ready, self._out = context.Queue(), context.Queue()
        self._child = context.Process(target=target, args=(*args, ready, self._out), daemon=True)
        self._child.start()
        wait_started(self._child, ready, what, start_within_s)

    def result(self, within_s: float) -> Any:
        try:
            return self._out.get(timeout=within_s)
        finally:
            self._child.join(30)
            if self._child.is_alive():
                self._child.kill()
                self._child.join(10)
