"""Real Kafka for the integration tests, found in the order of DESIGN.md section 7.

1. ``KAFKA_BOOTSTRAP``: an existing cluster.
2. testcontainers, when ``RMQ_TEST_KAFKA=testcontainers`` (its own issue wires podman in).
3. A local broker process from the pinned jars (``adapter.broker``), on a free port.

The fixture says which path it took in one line of the test output.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import broker as local_broker
from adapter import naming
from adapter.client import Message, MessageModel, Producer, PushConsumer, SendResult

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get("KAFKA_BOOTSTRAP")
    if existing:
        print(f"\n[kafka] using the existing cluster at {existing} (KAFKA_BOOTSTRAP)")
        yield existing
        return
    if os.environ.get("RMQ_TEST_KAFKA") == "testcontainers":
        raise RuntimeError("the testcontainers path is not wired in yet; unset RMQ_TEST_KAFKA")
    data_dir = Path(tmp_path_factory.mktemp("kafka"))
    config = local_broker.BrokerConfig(data_dir, port=local_broker.free_port_pair())
    address = local_broker.start(config)
    print(f"\n[kafka] started a local broker process at {address} (data in {data_dir})")
    try:
        yield address
    finally:
        local_broker.stop(data_dir)


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

    def make(group: str | None = None, **kwargs: object) -> Producer:
        producer = Producer(group or unique("PID"), **kwargs)  # type: ignore[arg-type]
        producer.set_name_server_address(kafka_bootstrap)
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
    ) -> PushConsumer:
        consumer = PushConsumer(group, orderly=orderly, message_model=model)
        consumer.set_name_server_address(kafka_bootstrap)
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
