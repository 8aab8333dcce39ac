"""Helpers shared by the test suites: one ``wait_until`` with a deadline, a recorder, fresh
names, and the Kafka reads the integration tests count messages with."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import pytest
from confluent_kafka import Message as KafkaRecord
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic
from hypothesis import HealthCheck, Phase, settings

from adapter import naming
from adapter.client import Message, Producer, SendResult
from adapter.delay import DelayLevels
from adapter.kafka import clients, topics
from adapter.kafka import metadata as kafka_metadata
from adapter.kafka.worker import ExactlyOnceWorker

T = TypeVar("T")

ON_A_BROKER = settings(
    max_examples=3,
    deadline=None,
    derandomize=True,  # CI runs the same cases each time
    phases=(Phase.explicit, Phase.generate),  # no shrinking: each example takes seconds
    print_blob=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
"""Hypothesis settings for a test whose examples run against a broker."""
W = TypeVar("W", bound=ExactlyOnceWorker)


def wait_until(
    predicate: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> T:
    """Return the predicate's first truthy value; fail the test when the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


class Recorder:
    """A consumer callback that records what it saw, thread-safely."""

    def __init__(self, result: object = None) -> None:
        from adapter.client import ConsumeStatus

        self.result = ConsumeStatus.CONSUME_SUCCESS if result is None else result
        self.messages: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, message: object) -> object:
        with self._lock:
            self.messages.append(message)
        return self.result

    @property
    def bodies(self) -> list[bytes]:
        with self._lock:
            return [m.body for m in self.messages]

    def __len__(self) -> int:
        with self._lock:
            return len(self.messages)


def metric(worker: ExactlyOnceWorker, name: str, **labels: str) -> float:
    """A worker's metric as Prometheus scrapes it (``..._total`` for a counter); 0 if unset."""
    return worker.registry.get_sample_value(name, labels) or 0.0


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def announce(config: pytest.Config, line: str) -> None:
    """One line in the test output, whether or not pytest captures it."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(line, flush=True)


def send(
    producer: Producer,
    topic: str,
    body: str | bytes,
    tags: str | None = None,
    keys: str | None = None,
    **props: str,
) -> SendResult:
    message = Message(topic)
    message.set_body(body)
    if tags:
        message.set_tags(tags)
    if keys:
        message.set_keys(keys)
    for key, value in props.items():
        message.set_property(key, value)
    return producer.send_sync(message)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001 where none), as `status` reads it."""
    wanted = [TopicPartition(naming.kafka_topic(topic), p) for p in range(partitions)]
    conf = {"bootstrap.servers": bootstrap}
    return dict(enumerate(kafka_metadata.committed_offsets(conf, group, wanted)))


DIRECT_COMMIT_2S = {"message.timestamp.before.max.ms": "2000"}
"""A topic for direct commits whose fence is 2 s, not 5: it refuses a record stamped more than
2 s before the broker's clock, so the tests' check-backs settle sooner."""


def create_topic(bootstrap: str, partitions: int = 2, prefix: str = "Topic", **configs: str) -> str:
    """A fresh topic on a broker other than the session's (no clean-up needed there), with the
    broker's default replication (3 on the three-broker cluster) and ``configs``."""
    name = unique(prefix)
    admin = clients.admin({"bootstrap.servers": bootstrap})
    new = NewTopic(naming.kafka_topic(name), partitions, config=configs)
    for future in admin.create_topics([new]).values():
        future.result(timeout=30)
    return name


def create_namespaced_topics(admin: Any, topic: str, namespaces: Sequence[str]) -> None:
    """``topic`` in each of ``namespaces`` (``<namespace>%<topic>``), one partition each."""
    wanted = [NewTopic(naming.kafka_topic(naming.with_namespace(n, topic)), 1) for n in namespaces]
    for future in admin.create_topics(wanted).values():
        future.result(timeout=30)


def init_system_topics(bootstrap: str, levels: DelayLevels) -> None:
    topics.init_topics(
        {"bootstrap.servers": bootstrap},
        topics.system_layout(topics.DEFAULT_HALF_PARTITIONS, levels),
    )


@contextlib.contextmanager
def running_workers() -> Iterator[Callable[[W], W]]:
    """Runs workers on threads; on exit stops them all and fails if one does not stop."""
    running: list[tuple[ExactlyOnceWorker, threading.Thread]] = []

    def run(worker: W) -> W:
        thread = threading.Thread(target=worker.run, name=worker.name, daemon=True)
        thread.start()
        running.append((worker, thread))
        return worker

    yield run
    for worker, _ in running:
        worker.stop()
    for worker, thread in running:
        thread.join(30)
        assert not thread.is_alive(), f"a {worker.name} did not stop within 30 s"


class _Client(Protocol):
    @property
    def is_running(self) -> bool: ...

    def shutdown(self) -> None: ...


C = TypeVar("C", bound=_Client)


@contextlib.contextmanager
def shut_down_after() -> Iterator[Callable[[C], C]]:
    """For factory fixtures: ``keep(client)`` returns the started client; on exit each one
    still running is shut down (a test may have done it already)."""
    started: list[_Client] = []

    def keep(client: C) -> C:
        started.append(client)
        return client

    yield keep
    for client in started:
        if client.is_running:
            client.shutdown()


def read_committed(
    bootstrap: str, topic: str, expected: int, timeout: float = 60
) -> list[KafkaRecord]:
    """Every record of Kafka topic ``topic`` (a RocketMQ name) a read_committed reader sees,
    once ``expected`` are there, and a little longer, so that duplicates would show."""
    kafka_topic = naming.kafka_topic(topic)
    consumer = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(kafka_topic, timeout=10)
        partitions = metadata.topics[kafka_topic].partitions
        consumer.assign([TopicPartition(kafka_topic, p, 0) for p in partitions])
        records: list[KafkaRecord] = []
        deadline = time.monotonic() + timeout
        settle_until = None
        while time.monotonic() < deadline:
            for record in consumer.consume(500, 0.2):
                if record.error() is None:
                    records.append(record)
            if len(records) >= expected and settle_until is None:
                settle_until = time.monotonic() + 2.0
            if settle_until is not None and time.monotonic() > settle_until:
                break
        return records
    finally:
        consumer.close()


def read_committed_all_there(
    bootstrap: str, topic: str, expected: int, timeout: float = 3
) -> list[KafkaRecord]:
    """What :func:`read_committed` reads when at least ``expected`` records are there, else an
    empty list: a predicate for :func:`wait_until` that waits for all of them, not the first."""
    records = read_committed(bootstrap, topic, expected, timeout)
    return records if len(records) >= expected else []


def parked_from(bootstrap: str, partition: int, offset: int) -> list[KafkaRecord]:
    """The records of the poison topic parked from ``partition``@``offset`` of their source."""
    return [
        r
        for r in read_committed(bootstrap, naming.POISON_TOPIC, 1, timeout=30)
        if dict(r.headers()).get("source.offset") == str(offset).encode()
        and dict(r.headers()).get("source.partition") == str(partition).encode()
    ]
