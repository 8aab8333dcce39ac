"""adapter.kafka.writing against a real broker: a record awaited from an event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer

from adapter import naming
from adapter.exceptions import DeliveryError
from adapter.kafka import clients, writing
from tests.support import read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


@contextmanager
def served_producer(bootstrap: str) -> Iterator[Producer]:
    """A producer whose delivery reports a thread of its own serves, as the proxy's sender's."""
    producer = clients.producer({"bootstrap.servers": bootstrap})
    serving = threading.Event()
    serving.set()

    def serve() -> None:
        while serving.is_set():
            producer.poll(0.05)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield producer
    finally:
        serving.clear()
        thread.join(5)
        producer.flush(10)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_records_awaited_together_from_one_loop_are_each_acknowledged_with_their_offset(
    kafka_bootstrap: str, new_topic
) -> None:
    name = new_topic(partitions=1)
    topic = naming.kafka_topic(name)

    async def send_all() -> list[int]:
        sends = [
            writing.produce_and_await(p, topic, f"m{i}".encode(), timeout_s=10, partition=0)
            for i in range(40)
        ]
        return [ack.offset for ack in await asyncio.gather(*sends)]

    with served_producer(kafka_bootstrap) as p:
        offsets = asyncio.run(send_all())
    assert sorted(offsets) == list(range(40))
    assert len(read_committed(kafka_bootstrap, name, 40)) == 40


def test_a_record_kafka_refuses_raises_the_reason(kafka_bootstrap: str, new_topic) -> None:
    topic = naming.kafka_topic(new_topic(partitions=1, **{"max.message.bytes": "1000"}))
    refused = pytest.raises(DeliveryError, match="Kafka refused .*too large")
    with served_producer(kafka_bootstrap) as p, refused:
        asyncio.run(writing.produce_and_await(p, topic, b"x" * 5000, timeout_s=10))


def test_a_record_never_acknowledged_raises_after_its_deadline_instead_of_hanging() -> None:
    with served_producer(f"127.0.0.1:{closed_port()}") as p:
        with pytest.raises(DeliveryError, match="no acknowledgement within 1 s"):
            asyncio.run(writing.produce_and_await(p, "nowhere", b"x", timeout_s=1))
        p.purge()
