"""What every adapter worker is configured with: Kafka, its id, its own transactions.

The exactly-once worker (:mod:`adapter.kafka.worker`) reads it; the schedule forwarder and the
transaction coordinator extend it with their own settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from adapter.config import (
    CONCURRENT_TRANSACTIONS_BACKOFF_MS,
    DEFAULT_MAX_MESSAGE_SIZE,
    GROUP_CONSUMER,
    HEADROOM,
    SAFE_PRODUCER,
    KafkaSettings,
    default_worker_id,
)
from adapter.exceptions import ConfigError

DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What every adapter worker is configured with: Kafka, its id, its own transactions."""

    kind: ClassVar[str] = "worker"
    linger_ms: ClassVar[int] = 5
    consumer_settings: ClassVar[Mapping[str, Any]] = {}

    kafka: KafkaSettings
    worker_id: str = field(default_factory=default_worker_id)
    kafka_transaction_timeout_ms: int = DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS
    """Kafka's ``transaction.timeout.ms``: how long a dead worker's open transaction holds
    back what it wrote, when its successor has another worker id."""
    max_batch: int = 2000
    """Most records one Kafka transaction carries."""
    max_wait_ms: int = 500
    """Longest a poll blocks while nothing is due, so stop() is noticed promptly."""

    def __post_init__(self) -> None:
        if self.kafka_transaction_timeout_ms < 1000:
            raise ConfigError(
                "the Kafka transaction timeout must be at least 1000 ms, "
                f"got {self.kafka_transaction_timeout_ms}"
            )
        if self.max_batch <= 0:
            raise ConfigError(f"max batch must be positive, got {self.max_batch}")
        if not self.worker_id:
            raise ConfigError("the worker id must not be empty")

    @property
    def transactional_id(self) -> str:
        return f"rmq-adapter-{self.kind}-{self.worker_id}"

    def producer(self) -> dict[str, Any]:
        """The worker's transactional producer."""
        return self.kafka.librdkafka(
            {
                "client.id": self.transactional_id,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": self.kafka_transaction_timeout_ms,
                **SAFE_PRODUCER,
                "linger.ms": self.linger_ms,
                "retry.backoff.ms": CONCURRENT_TRANSACTIONS_BACKOFF_MS,
                "message.max.bytes": DEFAULT_MAX_MESSAGE_SIZE + HEADROOM,
            }
        )

    def consumer(self, group: str) -> dict[str, Any]:
        return self.kafka.librdkafka(
            {
                "group.id": group,
                "client.id": self.transactional_id,
                **GROUP_CONSUMER,
                **self.consumer_settings,
            }
        )
