"""A record a share consumer of the 5.x ``SimpleConsumer`` fetched, as its pool holds it.

Reproduces what a 5.x proxy knows of a popped message: the message (the 2.0 consumer's view
of the record: headers are properties, earlier deliveries are reconsume times), its attempt
(Kafka's delivery count less the fetches the pool released unseen, as RocketMQ counts only
deliveries to the application) and whether it is the last delivery Kafka's limit leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.message import ReceivedMessage

__all__ = ["Fetched", "received"]


@dataclass(frozen=True, slots=True)
class Fetched:
    """A record a member holds, with the 2.0 view of it and its attempt."""

    record: KafkaRecord
    received: ReceivedMessage
    attempt: int
    """Kafka's delivery count less the fetches this consumer released unseen."""
    kafka_count: int = 1
    last: bool = False
    """The last delivery Kafka's limit leaves: it ends in the dead-letter topic, unless acked."""


def received(record: KafkaRecord, attempt: int) -> ReceivedMessage:
    """The 2.0 view of a share group's record (headers -> properties), as the 2.0 consumer
    builds it; earlier deliveries count as reconsume times."""
    ts_type, ts = record.timestamp()
    kafka_topic = str(record.topic())
    return ReceivedMessage(
        topic=naming.topic_of(kafka_topic),
        kafka_topic=kafka_topic,
        body=record.value(),
        queue_id=int(record.partition() or 0),
        queue_offset=int(record.offset() or 0),
        timestamp=ts,
        append_time=ts_type == TIMESTAMP_LOG_APPEND_TIME,
        headers=record.headers(),  # type: ignore[arg-type]
        earlier_deliveries=attempt - 1,
    )
