"""The drop-in ``PushConsumer``'s settings, RocketMQ's defaults, and its message model.

Reproduces the knobs of RocketMQ's ``DefaultMQPushConsumer`` that rocketmq-client-python 2.0
exposes (consume thread count 20, max reconsume times 16, ...) and turns them into librdkafka
settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from adapter import naming
from adapter.config import (
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_SEND_TIMEOUT_MS,
    GROUP_CONSUMER,
    HEADROOM,
    SAFE_PRODUCER,
    KafkaSettings,
)
from adapter.delay import DelayLevels
from adapter.exceptions import ConfigError
from adapter.schedule.signing import ScheduleSigner

DEFAULT_CONSUME_THREADS = 20
DEFAULT_SUSPEND_MS = 1000
DEFAULT_LOCAL_RETRY_MS = 5000
DEFAULT_MAX_IN_FLIGHT_PER_QUEUE = 1000
DEFAULT_COMMIT_INTERVAL_MS = 1000
DEFAULT_MAX_RECONSUME_TIMES = 16


class MessageModel(IntEnum):
    """``rocketmq.ffi.MessageModel``."""

    BROADCASTING = 0
    CLUSTERING = 1


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    kafka: KafkaSettings
    group: str
    message_model: MessageModel = MessageModel.CLUSTERING
    orderly: bool = False
    instance_name: str = "DEFAULT"
    thread_count: int = DEFAULT_CONSUME_THREADS
    batch_max_size: int = 1
    max_in_flight_per_queue: int = DEFAULT_MAX_IN_FLIGHT_PER_QUEUE
    suspend_ms: int = DEFAULT_SUSPEND_MS
    local_retry_ms: int = DEFAULT_LOCAL_RETRY_MS
    commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS
    max_reconsume_times: int = DEFAULT_MAX_RECONSUME_TIMES
    send_back_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    delay_levels: DelayLevels = field(default_factory=DelayLevels.parse)
    schedule_signer: ScheduleSigner | None = field(default_factory=ScheduleSigner.from_env)
    """Signs every SCHEDULE record (``RMQ_ADAPTER_SCHEDULE_SIGNER`` and ``_KEY``), for a
    forwarder that takes signed records only (:mod:`adapter.schedule.signing`)."""

    def __post_init__(self) -> None:
        if self.thread_count <= 0:
            raise ConfigError(f"thread count must be positive, got {self.thread_count}")
        if self.max_reconsume_times < 0:
            raise ConfigError(
                f"max reconsume times must be 0 or more, got {self.max_reconsume_times}"
            )
        if self.batch_max_size <= 0:
            raise ConfigError(f"batch max size must be positive, got {self.batch_max_size}")

    @property
    def kafka_group_id(self) -> str:
        if self.message_model == MessageModel.BROADCASTING:
            return naming.broadcast_group_id(self.group, self.instance_name)
        return self.group

    def librdkafka(self) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "group.id": self.kafka_group_id,
            "client.id": f"{self.group}@{self.instance_name}",
            **GROUP_CONSUMER,
            # RocketMQ's consumeTimeout is 15 minutes; a callback may run that long.
            "max.poll.interval.ms": 15 * 60 * 1000 + 60 * 1000,
            # RocketMQ clients refresh topic routes every 30 s (pollNameServerInterval).
            "topic.metadata.refresh.interval.ms": 30000,
        }
        return self.kafka.librdkafka(settings)

    def send_back_producer(self) -> dict[str, Any]:
        """The producer that sends failed messages back (to SCHEDULE or the dead-letter topic)."""
        settings: dict[str, Any] = {
            "client.id": f"{self.group}@{self.instance_name}-send-back",
            **SAFE_PRODUCER,
            "linger.ms": 2,
            "message.timeout.ms": self.send_back_timeout_ms,
            "message.max.bytes": DEFAULT_MAX_MESSAGE_SIZE + HEADROOM,
        }
        return self.kafka.librdkafka(settings)
