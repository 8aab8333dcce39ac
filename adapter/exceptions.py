"""Errors: the names of ``rocketmq.exceptions`` plus the adapter's own tree.

Reproduces the exception classes of rocketmq-client-python 2.0 (``RocketMQException`` and
its producer and consumer branches) so ``except`` clauses keep working after the import
change. The adapter's own failures hang off one root, :class:`AdapterError`, with one branch
per subsystem; each carries the data needed to find the record (topic, partition, offset,
msg_id) and the underlying ``KafkaError`` where there is one.

Known gaps: ``NullPointerException`` and ``MallocFailed`` exist only for import
compatibility; nothing here raises them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

__all__ = [
    "RocketMQException",
    "NullPointerException",
    "MallocFailed",
    "ProducerException",
    "ProducerStartFailed",
    "ProducerSendSyncFailed",
    "ProducerSendOnewayFailed",
    "ProducerSendOrderlyFailed",
    "ProducerSendAsyncFailed",
    "ConsumerException",
    "PushConsumerStartFailed",
    "AdapterError",
    "InvalidNameError",
    "MessageTooLargeError",
    "InvalidMessageError",
    "TagExpressionError",
    "CodecError",
    "CorruptRecordError",
    "UnknownSchemaError",
    "UnusableRecordError",
    "DeliveryError",
    "LocalQueueFull",
    "KafkaUnavailableError",
    "TopicLayoutError",
    "BrokerError",
    "ConfigError",
    "Bug",
]


class RocketMQException(Exception):
    """Root of the drop-in exception tree (``rocketmq.exceptions.RocketMQException``)."""


class NullPointerException(RocketMQException):
    """Kept for import compatibility; the adapter never raises it."""


class MallocFailed(RocketMQException):
    """Kept for import compatibility; the adapter never raises it."""


class ProducerException(RocketMQException):
    """A producer operation failed."""


class ProducerStartFailed(ProducerException):
    """The producer could not start (bad configuration, unreachable bootstrap servers)."""


class ProducerSendSyncFailed(ProducerException):
    """``send_sync`` was not acknowledged by Kafka, or the message was refused before sending."""


class ProducerSendOnewayFailed(ProducerException):
    """``send_oneway`` could not hand the message to the client (refused before sending)."""


class ProducerSendOrderlyFailed(ProducerException):
    """``send_orderly_with_sharding_key`` was not acknowledged or was refused."""


class ProducerSendAsyncFailed(ProducerException):
    """Kept for import compatibility (the Python client has no async send)."""


class ConsumerException(RocketMQException):
    """A consumer operation failed."""


class PushConsumerStartFailed(ConsumerException):
    """The push consumer could not start (no subscription, bad group, unreachable Kafka)."""


class AdapterError(RocketMQException):
    """Root of the adapter's own errors.

    Subclasses of :class:`RocketMQException` so that code catching the drop-in root also
    catches these. Attributes are ``None`` where they do not apply. ``kind`` names the class
    of failure in one or two words; :attr:`reason` (``kind: message``) is what a parked record
    carries in its ``reason`` header.
    """

    kind: ClassVar[str] = "error"

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        msg_id: str | None = None,
        kafka_error: Any = None,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.msg_id = msg_id
        self.kafka_error = kafka_error

    @property
    def reason(self) -> str:
        return f"{self.kind}: {self.args[0] if self.args else ''}"

    def located(self, topic: str, partition: int, offset: int) -> Self:
        """This error, with the record it is about (for errors raised before that was known)."""
        self.topic, self.partition, self.offset = topic, partition, offset
        return self

    def __str__(self) -> str:
        text = super().__str__()
        if self.partition is not None and self.offset is not None:
            return f"{text} (record {self.topic}[{self.partition}]@{self.offset})"
        return text


class ConfigError(AdapterError):
    """A setting is invalid (a bad delay-level string, a negative timeout, an unknown key)."""


class InvalidNameError(AdapterError, ValueError):
    """A topic or group name breaks RocketMQ's naming rules or Kafka's length limit."""

    kind = "invalid"


class InvalidMessageError(AdapterError, ValueError):
    """A message is not sendable as built (no body, a reserved property, a bad delay level)."""


class MessageTooLargeError(InvalidMessageError):
    """The body is larger than the producer's ``max_message_size`` (default 4 MiB)."""


class TagExpressionError(AdapterError, ValueError):
    """A subscription expression is not ``*`` or ``TagA || TagB``."""


class CodecError(AdapterError):
    """A system-topic record could not be encoded or decoded. ``raw`` keeps the bytes."""

    kind = "corrupt"

    def __init__(self, message: str, *, raw: bytes = b"", **where: Any) -> None:
        super().__init__(message, **where)
        self.raw = raw


class CorruptRecordError(CodecError):
    """The bytes are not a valid single-object-encoded record of a known schema."""


class UnknownSchemaError(CodecError):
    """The bytes carry a well-formed header whose schema fingerprint this version does not know."""


class UnusableRecordError(AdapterError):
    """A record decodes but can never be applied: addressed to a system topic, written to the
    wrong partition, naming an invalid group. ``kind`` says which."""

    def __init__(self, kind: str, message: str, **where: Any) -> None:
        super().__init__(message, **where)
        self.kind = kind  # type: ignore[misc]


class DeliveryError(AdapterError):
    """Kafka did not acknowledge a record in time, or refused it; ``kafka_error`` has the cause."""

    kind = "not delivered"


class LocalQueueFull(DeliveryError):
    """The client's local send queue stayed full for the whole send timeout: Kafka takes
    records slower than they are sent (RocketMQ's "too many requests")."""

    kind = "local queue full"


class KafkaUnavailableError(AdapterError):
    """Kafka could not be reached at the configured address within the deadline."""

    kind = "unreachable"


class TopicLayoutError(AdapterError):
    """Existing topics break the partition rules of the system topic layout."""


class BrokerError(AdapterError):
    """The local broker could not be started or stopped."""


class Bug(Exception):
    """A broken invariant of the adapter itself, never bad input nor an outage. Deliberately
    not an :class:`AdapterError`: a worker retries its failed turns for as long as Kafka is
    away, but stops at once with the reason on a bug, instead of repeating it every second."""
