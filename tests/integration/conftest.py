"""Real Kafka for the integration tests (see ``tests/brokers.py`` for how it is found).

The session broker is shared by every test; ``own_kafka`` starts a broker for one module, for
tests that inject faults into it. Each fixture says which path it took in one line of output.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import naming, status, topics
from adapter.client import (
    Message,
    MessageModel,
    Producer,
    PushConsumer,
    SendResult,
    TransactionMQProducer,
)
from adapter.config import CoordinatorConfig, ForwarderConfig, KafkaSettings
from adapter.delay import DelayLevels
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.transaction.coordinator import TransactionCoordinator
from adapter.transaction.state import CheckPolicy
from adapter.transactional_worker import TransactionalWorker
from tests.brokers import Broker, start_broker

pytestmark = pytest.mark.kafka


def announce(config: pytest.Config, line: str) -> None:
    """One line in the test output, whether or not pytest captures it."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(line, flush=True)


@pytest.fixture(scope="session")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    broker = start_broker(tmp_path_factory.mktemp("kafka"))
    announce(request.config, f"\n[kafka] {broker.description}")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka: Broker) -> str:
    return kafka.bootstrap


@pytest.fixture(scope="module")
def own_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    """A broker of the module's own, to pause and restart without disturbing other tests."""
    broker = start_broker(tmp_path_factory.mktemp("own-kafka"))
    announce(request.config, f"\n[kafka] for fault injection: {broker.description}")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def new_topic(admin: AdminClient) -> Iterator[Callable[..., str]]:
    """Factory: ``new_topic(partitions=4, prefix="T", **configs)`` makes a fresh topic."""
    created: list[str] = []

    def make(partitions: int = 4, prefix: str = "Topic", **configs: str) -> str:
        name = unique(prefix)
        futures = admin.create_topics(
            [NewTopic(naming.kafka_topic(name), partitions, 1, config=configs)]
        )
        for future in futures.values():
            future.result(timeout=30)
        created.append(naming.kafka_topic(name))
        return name

    yield make
    if created:
        admin.delete_topics(created, operation_timeout=30)


@pytest.fixture
def new_group() -> Callable[[], str]:
    """Factory: a fresh consumer or producer group name."""
    return lambda prefix="GID": unique(prefix)


@pytest.fixture
def make_producer(kafka_bootstrap: str) -> Iterator[Callable[..., Producer]]:
    """Factory: a started ``Producer`` on the test broker, shut down after the test."""
    producers: list[Producer] = []

    def make(
        group: str | None = None, *, bootstrap: str | None = None, **kwargs: object
    ) -> Producer:
        producer = Producer(group or unique("PID"), **kwargs)  # type: ignore[arg-type]
        producer.set_name_server_address(bootstrap or kafka_bootstrap)
        producer.start()
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.shutdown()


@pytest.fixture
def make_consumer(kafka_bootstrap: str) -> Iterator[Callable[..., PushConsumer]]:
    """Factory: a started ``PushConsumer`` subscribed to one topic, shut down after the test."""
    consumers: list[PushConsumer] = []

    def make(
        group: str,
        topic: str,
        callback: Callable[..., object],
        expression: str = "*",
        *,
        orderly: bool = False,
        model: MessageModel = MessageModel.CLUSTERING,
        threads: int | None = None,
        instance: str | None = None,
        bootstrap: str | None = None,
        max_reconsume_times: int | None = None,
    ) -> PushConsumer:
        consumer = PushConsumer(group, orderly=orderly, message_model=model)
        if max_reconsume_times is not None:
            consumer.set_max_reconsume_times(max_reconsume_times)
        consumer.set_name_server_address(bootstrap or kafka_bootstrap)
        if threads is not None:
            consumer.set_thread_count(threads)
        if instance is not None:
            consumer.set_instance_name(instance)
        consumer.subscribe(topic, callback, expression)
        consumer.start()
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.shutdown()


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
    return dict(enumerate(status.committed_offsets(KafkaSettings(bootstrap), group, wanted)))


def create_topic(bootstrap: str, partitions: int = 2, prefix: str = "Topic") -> str:
    """A fresh topic on a broker other than the session's (no clean-up needed there)."""
    name = unique(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(naming.kafka_topic(name), partitions, 1)
    for future in admin.create_topics([new]).values():
        future.result(timeout=30)
    return name


def init_system_topics(bootstrap: str, levels: DelayLevels) -> None:
    topics.init_topics(bootstrap, topics.system_layout(topics.DEFAULT_HALF_PARTITIONS, levels))


@pytest.fixture(scope="session")
def system_topics(kafka_bootstrap: str) -> str:
    """The session broker with its system topics (default delay levels); its bootstrap."""
    init_system_topics(kafka_bootstrap, DelayLevels.parse())
    return kafka_bootstrap


@pytest.fixture
def start_forwarder(system_topics: str) -> Iterator[Callable[..., ScheduleForwarder]]:
    """Factory: a schedule forwarder running on a thread, stopped after the test."""
    with running_workers() as run:

        def start(
            bootstrap: str | None = None, levels: DelayLevels | None = None, **kwargs: Any
        ) -> ScheduleForwarder:
            config = ForwarderConfig(
                KafkaSettings(bootstrap or system_topics),
                levels=levels or DelayLevels.parse(),
                worker_id=unique("test"),
                max_wait_ms=200,
                **kwargs,
            )
            return run(ScheduleForwarder(config))

        yield start


@pytest.fixture
def start_coordinator(system_topics: str) -> Iterator[Callable[..., TransactionCoordinator]]:
    """Factory: a transaction coordinator running on a thread, stopped after the test. Keyword
    arguments are the check policy (``transaction_timeout_ms``, ``check_interval_ms``, ...)."""
    with running_workers() as run:

        def start(bootstrap: str | None = None, **policy: Any) -> TransactionCoordinator:
            config = CoordinatorConfig(
                KafkaSettings(bootstrap or system_topics),
                policy=CheckPolicy(**policy),
                worker_id=unique("test"),
                max_wait_ms=200,
            )
            return run(TransactionCoordinator(config))

        yield start


W = TypeVar("W", bound=TransactionalWorker)


@contextlib.contextmanager
def running_workers() -> Iterator[Callable[[W], W]]:
    """Runs workers on threads; on exit stops them all and fails if one does not stop."""
    running: list[tuple[TransactionalWorker, threading.Thread]] = []

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


@pytest.fixture
def make_transaction_producer(
    system_topics: str,
) -> Iterator[Callable[..., TransactionMQProducer]]:
    """Factory: a started ``TransactionMQProducer`` of a group, shut down after the test."""
    producers: list[TransactionMQProducer] = []

    def make(
        group: str, checker: Callable[..., object], *, bootstrap: str | None = None
    ) -> TransactionMQProducer:
        producer = TransactionMQProducer(group, checker)
        producer.set_name_server_address(bootstrap or system_topics)
        producer.start()
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.shutdown()


def read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list:
    """Every record of Kafka topic ``topic`` (a RocketMQ name) a read_committed reader sees,
    once ``expected`` are there, and a little longer, so that duplicates would show."""
    kafka_topic = naming.kafka_topic(topic)
    consumer = Consumer(
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
        records: list = []
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
