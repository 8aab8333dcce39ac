"""The drop-in ``Producer``'s settings, with RocketMQ's defaults.

Reproduces the knobs of RocketMQ's ``DefaultMQProducer`` that rocketmq-client-python 2.0
exposes (send timeout 3000 ms, max message size 4 MiB, ...) and turns them into librdkafka
settings. The transactional producer's fast path and check consumer start from
:meth:`ProducerConfig.producer_settings` (:mod:`adapter.transaction.group_commit`,
:mod:`adapter.transaction.checks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adapter.config import (
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_SEND_TIMEOUT_MS,
    HEADROOM,
    SAFE_PRODUCER,
    KafkaSettings,
)
from adapter.delay import DelayLevels
from adapter.exceptions import ConfigError
from adapter.schedule.signing import ScheduleSigner


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    kafka: KafkaSettings
    group: str
    instance_name: str = "DEFAULT"
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    compress_level: int | None = None
    delay_levels: DelayLevels = field(default_factory=DelayLevels.parse)
    fast_commit: bool = True
    """A transactional producer commits its decisions in Kafka transactions of its own
    (``RMQ_ADAPTER_FAST_COMMIT=0`` sends them through the coordinator instead)."""
    group_commit_ms: int = 5
    """How long the first decision of a group waits for others before the group commits. At
    500 transactions/s here, 5 ms (four lanes) gave commit-to-visible p99 73-76 ms where 2 ms
    gave 97-135 ms at the same p50 (36-37 ms): fewer Kafka transactions a second, fewer
    "concurrent transactions" retries (BENCHMARKS.md, 2026-11-24)."""
    schedule_signer: ScheduleSigner | None = field(default_factory=ScheduleSigner.from_env)
    """Signs every SCHEDULE record (``RMQ_ADAPTER_SCHEDULE_SIGNER`` and ``_KEY``), for a
    forwarder that takes signed records only (:mod:`adapter.schedule.signing`)."""

    def __post_init__(self) -> None:
        if self.group_commit_ms < 0:
            raise ConfigError(f"group commit time must be 0 or more, got {self.group_commit_ms}")
        if self.send_timeout_ms <= 0:
            raise ConfigError(f"send timeout must be positive, got {self.send_timeout_ms} ms")
        if self.max_message_size <= 0:
            raise ConfigError(f"max message size must be positive, got {self.max_message_size}")
        if self.compress_level is not None and not 0 <= self.compress_level <= 9:
            raise ConfigError(f"compress level must be 0..9, got {self.compress_level}")

    def producer_settings(self, client_id: str, headroom: int) -> dict[str, Any]:
        """What every producer of an application shares: idempotent, acks from all replicas,
        one request in flight per broker, the send timeout, the size limit (plus ``headroom``
        for headers and envelopes) and the compression level.

        One request in flight: with several, a request refused by a partition's old leader
        makes librdkafka's idempotent producer "recover" the requests behind it, and it then
        stores some batches twice, at adjacent offsets (librdkafka#4953, open). The chaos run
        found it (seed 11, 4 minutes of broker faults: 7 messages written twice; with one in
        flight, 0); on one broker the send rates did not move (``bench/client.py``)."""
        settings: dict[str, Any] = {
            "client.id": client_id,
            **SAFE_PRODUCER,
            "max.in.flight.requests.per.connection": 1,
            "message.timeout.ms": self.send_timeout_ms,
            "request.timeout.ms": min(self.send_timeout_ms, 30000),
            "message.max.bytes": self.max_message_size + headroom,
        }
        if self.compress_level is not None:
            settings["compression.codec"] = "gzip"
            settings["compression.level"] = self.compress_level
        return settings

    def librdkafka(self) -> dict[str, Any]:
        settings = self.producer_settings(f"{self.group}@{self.instance_name}", HEADROOM)
        return self.kafka.librdkafka({**settings, "linger.ms": 5})
