"""Real Kafka for the tests (see ``tests/brokers.py`` for how it is found), and factories.

The session broker is shared by every test; ``own_kafka`` starts a broker for one module, for
tests that inject faults into it, and ``clock_kafka`` one for the tests that drive forwarders
on an injected clock. Each fixture says which path it took in one line of output.
Fixtures are created only when a test asks for one, so the unit tests never start a broker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import naming, v5
from adapter.client import MessageModel, Producer, PushConsumer, TransactionMQProducer
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.kafka import clients
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.transaction.config import CheckPolicy, CoordinatorConfig
from adapter.transaction.coordinator import TransactionCoordinator
from tests.brokers import Broker, engine_answers, start_broker
from tests.cluster import KafkaCluster, start_cluster
from tests.support import announce, init_system_topics, running_workers, shut_down_after, unique
from tests.workers import kill_leftovers


@pytest.fixture(scope="session", autouse=True)
def no_worker_left_behind() -> Iterator[None]:
    """Worker processes a failed test did not stop are killed when the session ends."""
    yield
    kill_leftovers()


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
def kafka_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaCluster]:
    """Three Kafka brokers in containers (``tests/cluster.py``), started on first use. It needs
    a container engine (``make test`` starts podman's); without one it fails, never skips."""
    if not engine_answers():
        raise RuntimeError(
            "the three-broker cluster runs in containers and no container engine answers at "
            f"DOCKER_HOST={os.environ.get('DOCKER_HOST', '(unset)')}: run the suite with "
            "`make test` or through infra/with-podman.sh"
        )
    cluster = start_cluster(tmp_path_factory.mktemp("certificates"))
    announce(request.config, f"\n[kafka cluster] {cluster.description}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def admin(kafka_bootstrap: str) -> AdminClient:
    return clients.admin({"bootstrap.servers": kafka_bootstrap})


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


@pytest.fixture(scope="session")
def system_topics(kafka_bootstrap: str) -> str:
    """The session broker with its system topics (default delay levels); its bootstrap."""
    init_system_topics(kafka_bootstrap, DelayLevels.parse())
    return kafka_bootstrap


@pytest.fixture(scope="session")
def clock_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A broker with system topics of this test process's own, for forwarders driven on an
    injected clock; its bootstrap. On the session broker such a forwarder would share the
    group of the other tests' forwarders, take levels over from them and move their records
    when its clock says: days early, or held behind another test's record. Like a production
    cluster, it creates no topic on use."""
    broker = start_broker(
        tmp_path_factory.mktemp("clock-kafka"), {"auto.create.topics.enable": "false"}
    )
    announce(request.config, f"\n[kafka] for injected clocks: {broker.description}")
    try:
        init_system_topics(broker.bootstrap, DelayLevels.parse())
        yield broker.bootstrap
    finally:
        broker.stop()


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

        def start(
            bootstrap: str | None = None, worker_id: str | None = None, **policy: Any
        ) -> TransactionCoordinator:
            config = CoordinatorConfig(
                KafkaSettings(bootstrap or system_topics),
                policy=CheckPolicy(**policy),
                worker_id=worker_id or unique("test"),
                max_wait_ms=200,
            )
            return run(TransactionCoordinator(config))

        yield start


@pytest.fixture
def make_transaction_producer(
    system_topics: str,
) -> Iterator[Callable[..., TransactionMQProducer]]:
    """Factory: a started ``TransactionMQProducer`` of a group, shut down after the test."""
    producers: list[TransactionMQProducer] = []

    def make(
        group: str, checker: Callable[..., object], *, bootstrap: str | None = None, **kwargs: Any
    ) -> TransactionMQProducer:
        producer = TransactionMQProducer(group, checker, **kwargs)
        producer.set_name_server_address(bootstrap or system_topics)
        producer.start()
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.shutdown()


@pytest.fixture
def make_v5_producer(system_topics: str) -> Iterator[Callable[..., v5.Producer]]:
    """Factory: ``make_v5_producer(*topics, checker=None, bootstrap=None)``, a started 5.x
    producer on the test broker (its system topics created) or on ``bootstrap``, shut down
    after the test unless the test did."""
    with shut_down_after() as keep:

        def make(
            *topics: str,
            checker: v5.TransactionChecker | None = None,
            bootstrap: str | None = None,
        ) -> v5.Producer:
            config = v5.ClientConfiguration(bootstrap or system_topics, v5.Credentials())
            producer = keep(v5.Producer(config, topics, checker=checker))
            producer.startup()
            return producer

        yield make
