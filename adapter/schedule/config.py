"""The schedule forwarder's settings (``rmq-adapter worker schedule``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from adapter.delay import DelayLevels
from adapter.exceptions import ConfigError
from adapter.kafka.worker_config import WorkerConfig
from adapter.schedule.grants import ScheduleGrants

DEFAULT_MISSING_TOPIC_GRACE_MS = 60_000


@dataclass(frozen=True, slots=True)
class ForwarderConfig(WorkerConfig):
    """The schedule forwarder worker (``rmq-adapter worker schedule``)."""

    kind: ClassVar[str] = "schedule"
    consumer_settings: ClassVar[Mapping[str, Any]] = {"queued.max.messages.kbytes": 16384}

    max_batch: int = 5000
    levels: DelayLevels = field(default_factory=DelayLevels.parse)
    hold_bytes: int = 4 * 1024 * 1024
    """How much of a level waits in memory before the level is paused until its head is due."""
    prepare_ahead_ms: int = 20
    """How long before its records fall due a batch's Kafka transaction begins and sends its
    consumed positions (the slow part of a transaction); the records are produced, and the
    transaction committed, only once they are due. 0: everything happens once they are due."""
    missing_topic_grace_ms: int = DEFAULT_MISSING_TOPIC_GRACE_MS
    """How long a due record whose real topic does not exist is retried (its level waits)
    before it is parked in ``RMQ_SYS_POISON_TOPIC`` with reason ``missing topic``."""
    grants: ScheduleGrants | None = None
    """Set: only records signed by a granted application are taken, and each reaches only the
    topics granted to its signer (:mod:`adapter.schedule.grants`)."""

    def __post_init__(self) -> None:
        super(ForwarderConfig, self).__post_init__()
        if not 0 <= self.prepare_ahead_ms <= 1000:
            raise ConfigError(f"prepare-ahead must be 0 to 1000 ms, got {self.prepare_ahead_ms}")
        if self.missing_topic_grace_ms < 0:
            raise ConfigError(
                f"missing-topic grace must be 0 ms or more, got {self.missing_topic_grace_ms}"
            )
