"""Fetching a batch from a Kafka consumer without waiting for the batch to fill.

Not a RocketMQ behaviour: RocketMQ's broker services read their queues directly. The workers
read through librdkafka, whose ``consume(n, timeout)`` returns only once ``n`` records are
there or the whole timeout has passed, which would add up to the timeout to every delivery.
``fetch`` waits for the first record only, then takes what is already fetched.

Known gaps: none.
"""

from __future__ import annotations

from confluent_kafka import Consumer
from confluent_kafka import Message as KafkaRecord


def fetch(consumer: Consumer, max_records: int, timeout_s: float) -> list[KafkaRecord]:
    """Up to ``max_records`` records as soon as one is there; ``[]`` after ``timeout_s``."""
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    if max_records <= 1:
        return [first]
    return [first, *consumer.consume(max_records - 1, 0)]
