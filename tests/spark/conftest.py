"""Fixtures of the Spark tests: one local[2] SparkSession for the whole run, real Kafka (the
integration suite's fixtures, imported here explicitly), payments, a standalone cluster.

Every Spark job in these tests runs on the real Kafka broker through Spark's own Kafka source,
and writes real Delta tables under the test's tmp directory. The session is created once per
run (a JVM start and its first query cost seconds); jobs that must run in a process of their
own (the SIGKILL test, the standalone cluster) start the CLI as a child process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyspark
import pytest
from confluent_kafka import KafkaError, TopicPartition
from pyspark.sql import SparkSession

from adapter import naming
from adapter.client import Message, Producer, SendResult
from adapter.kafka import clients
from adapter.spark import orders
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.session import LOG4J_CONFIG, build_session
from tests.brokers import ROOT
from tests.support import unique, wait_until

TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Every JVM of these tests lives for seconds to minutes: C1 alone compiles sooner, which
shortens a cold driver's first batch by a quarter here; long-running jobs keep the default."""


@pytest.fixture(scope="session")
def spark(kafka_bootstrap: str) -> Iterator[SparkSession]:
    """The one local[2] session of the run (see adapter.spark.session for its settings)."""
    config = SparkJobConfig(
        Job.TELEMETRY, kafka_bootstrap, Path("."), Path("."), java_options=TEST_JAVA_OPTIONS
    )
    session = build_session(config)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def job_config(kafka_bootstrap: str, tmp_path: Path) -> Callable[..., SparkJobConfig]:
    """Factory: a job's config on the test broker, availableNow, state under tmp_path."""

    def make(job: Job | str, *topics: str, name: str = "job", **changes: Any) -> SparkJobConfig:
        settings: dict[str, Any] = {
            "bootstrap": kafka_bootstrap,
            "topics": topics or None,
            "checkpoint": tmp_path / name / "checkpoint",
            "table": tmp_path / name / "table",
            "available_now": True,
        }
        settings.update(changes)
        return SparkJobConfig.from_env(job, environ={}, **settings)

    return make


@dataclass(frozen=True)
class Payment:
    order_id: str
    user_id: str
    amount: Decimal

    @property
    def points(self) -> int:
        return int(self.amount // 1)


def payment_message(topic: str, payment: Payment) -> Message:
    message = Message(topic)
    message.set_keys(payment.order_id)
    message.set_tags("Paid")
    message.set_body(
        orders.encode(
            orders.OrderPaid(
                order_id=payment.order_id,
                user_id=payment.user_id,
                amount=payment.amount,
                currency="EUR",
                paid_at=int(time.time() * 1000),
            )
        )
    )
    return message


def payments(count: int, prefix: str = "order", users: int = 4, start: int = 0) -> list[Payment]:
    """``count`` payments of users user-0..user-(users-1), amounts with cents (floor matters)."""
    return [
        Payment(
            f"{prefix}-{i:04d}", f"user-{i % users}", Decimal(f"{5 + (i * 7) % 40}.{i % 100:02d}")
        )
        for i in range(start, start + count)
    ]


def send_payments(producer: Producer, topic: str, items: list[Payment]) -> list[SendResult]:
    return [producer.send_sync(payment_message(topic, p)) for p in items]


def expected_balances(items: list[Payment]) -> dict[str, int]:
    balances: dict[str, int] = {}
    for p in items:
        balances[p.user_id] = balances.get(p.user_id, 0) + p.points
    return balances


def records_of(bootstrap: str, kafka_topic: str, partitions: list[int] | None = None) -> list[Any]:
    """Every committed record of ``kafka_topic`` (all partitions, or ``partitions``), read to
    the end of each partition as it is now."""
    consumer = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("expect"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        if partitions is None:
            metadata = consumer.list_topics(kafka_topic, timeout=10).topics[kafka_topic]
            partitions = sorted(metadata.partitions)
        consumer.assign([TopicPartition(kafka_topic, p, 0) for p in partitions])
        records: list[Any] = []
        ended: set[int] = set()
        stop_at = time.monotonic() + 30.0
        while len(ended) < len(partitions) and time.monotonic() < stop_at:
            for record in consumer.consume(500, 0.5):
                if record.error() is None:
                    records.append(record)
                elif record.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(record.partition())
        assert len(ended) == len(partitions), f"could not read {kafka_topic} to its end"
        return records
    finally:
        consumer.close()


def committed(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[Any]:
    """The committed records of RocketMQ topic ``topic`` once there are ``count`` of them."""
    name = naming.kafka_topic(topic)
    return wait_until(
        lambda: (found := records_of(bootstrap, name)) and len(found) >= count and found,
        timeout=timeout,
        interval=0.2,
        what=f"{count} committed records on {topic}",
    )


# -- child processes ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli_command(*args: str) -> list[str]:
    """``rmq-adapter --log-level WARNING spark ...`` as a child process."""
    return [sys.executable, "-m", "adapter", "--log-level", "WARNING", "spark", *args]


def spark_child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["RMQ_ADAPTER_SPARK_JAVA_OPTIONS"] = TEST_JAVA_OPTIONS
    env["PYTHONPATH"] = str(ROOT)
    return env


class Child:
    """A process in a session of its own (the Python driver and the JVM it launches), killed
    as a group with SIGKILL or stopped with SIGTERM; its output goes to a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._out = log.open("w")
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv
            args,
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env or spark_child_env(),
            start_new_session=True,
        )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL to the child's process group: the Python driver and its JVM at once."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.process.args} ran past {timeout} s:\n{self.output[-3000:]}"
            ) from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        self._out.close()


@pytest.fixture
def children() -> Iterator[Callable[..., Child]]:
    """Factory: start a child process; every one still running is killed after the test."""
    started: list[Child] = []

    def start(args: list[str], log: Path, env: dict[str, str] | None = None) -> Child:
        child = Child(args, log, env)
        started.append(child)
        return child

    yield start
    for child in started:
        child.close()


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str
    web_url: str

    def state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as reply:  # noqa: S310
            return dict(json.load(reply))


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and one worker (2 cores, 1 GiB) on 127.0.0.1, started with
    PySpark's own ``spark-class``, stopped by PID afterwards."""
    home = Path(pyspark.__file__).resolve().parent
    spark_class = str(home / "bin" / "spark-class")
    tmp = tmp_path_factory.mktemp("spark-standalone")
    port, web, worker_web = free_port(), free_port(), free_port()
    env = spark_child_env()
    env.update(
        SPARK_HOME=str(home),
        SPARK_WORKER_DIR=str(tmp / "work"),
        SPARK_LOG_DIR=str(tmp),
        SPARK_DAEMON_JAVA_OPTS=f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}",
    )
    processes: list[subprocess.Popen[bytes]] = []
    logs = []

    def daemon(name: str, *args: str) -> None:
        log = (tmp / f"{name}.log").open("w")
        logs.append(log)
        processes.append(
            subprocess.Popen(  # noqa: S603 - fixed argv
                [spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        )

    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}")
    try:
        daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web),
        )
        daemon(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            cluster.master_url,
            "--cores",
            "2",
            "--memory",
            "1g",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(worker_web),
            "--work-dir",
            str(tmp / "work"),
        )

        def worker_alive() -> bool:
            try:
                workers = cluster.state().get("workers", [])
            except OSError:
                return False
            return any(w.get("state") == "ALIVE" for w in workers)

        wait_until(worker_alive, timeout=60, interval=0.5, what="the standalone worker to register")
        yield cluster
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        for log in logs:
            log.close()
