"""The coordinator's settings: how it checks half messages back, and its worker.

:class:`CheckPolicy` holds RocketMQ's broker settings for the check-back, with its defaults;
:class:`CoordinatorConfig` is the ``rmq-adapter worker transactions`` process's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from adapter.exceptions import ConfigError
from adapter.kafka.worker_config import WorkerConfig


@dataclass(frozen=True, slots=True)
class CheckPolicy:
    """RocketMQ's broker settings for the check-back, with its defaults."""

    transaction_timeout_ms: int = 6_000
    """``transactionTimeOut``: the first check comes this long after the message was born (and
    never before :data:`EARLIEST_CHECK_MS`)."""
    check_interval_ms: int = 30_000
    """``transactionCheckInterval``: the time between two checks of one message."""
    check_max: int = 15
    """``transactionCheckMax``: a message checked this often is discarded at its next due time."""
    retention_ms: int = 72 * 3600 * 1000
    """``fileReservedTime``: a message older than this is discarded at its next due time."""
    end_wait_ms: int = 10_000
    """How long an END naming a half message that does not exist yet waits before refusal."""

    def __post_init__(self) -> None:
        for name in ("transaction_timeout_ms", "check_interval_ms", "retention_ms", "end_wait_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.check_max < 0:
            raise ConfigError(f"check max must be 0 or more, got {self.check_max}")


@dataclass(frozen=True, slots=True)
class CoordinatorConfig(WorkerConfig):
    """The transaction coordinator worker (``rmq-adapter worker transactions``). HALF and END
    are subscribed together; the range assignor gives one worker partition p of both (they
    have the same partition count)."""

    kind: ClassVar[str] = "transactions"
    linger_ms: ClassVar[int] = 2
    consumer_settings: ClassVar[Mapping[str, Any]] = {
        "partition.assignment.strategy": "range",
        "fetch.wait.max.ms": 20,
    }

    policy: CheckPolicy = field(default_factory=CheckPolicy)
    record_linger_ms: int = 100
    """How long decisions that only need their OP record (a fast-path commit or rollback, a
    duplicate) may wait to be recorded together with later ones: one Kafka transaction then
    records many. Anything else (a delivery, a check, a parked record) is applied at once."""
