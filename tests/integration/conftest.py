"""Real Kafka for the integration tests (see ``tests/brokers.py`` for how it is found).

The session broker is shared by every test; ``own_kafka`` starts a broker for one module, for
tests that inject faults into it. Each fixture says which path it took in one line of output.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import naming
from adapter.client import Message, MessageModel, Producer, PushConsumer, SendResult
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
    ) -> PushConsumer:
        consumer = PushConsumer(group, orderly=orderly, message_model=model)
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


def committed_offsets(
    admin: AdminClient, group: str, topic: str, partitions: int
) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(naming.kafka_topic(topic), p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}
