"""The records the adapter writes to its system topics, one dataclass per Avro schema.

Each class mirrors ``schemas/<ClassName>.avsc`` (namespace ``rmqkafka.v1``) field for
field, in the same order; :mod:`adapter.wire.codec` turns them into bytes and back. They stand
for these RocketMQ concepts:

- :class:`HalfMessage`: a transactional message in its prepared state, which RocketMQ
  stores in ``RMQ_SYS_TRANS_HALF_TOPIC`` (with the real topic and queue moved into the
  ``REAL_TOPIC``/``REAL_QID`` properties) until the producer commits or rolls it back.
- :class:`EndTransaction`: the ``END_TRANSACTION`` request a producer sends with its
  local-transaction state (``COMMIT_MESSAGE``, ``ROLLBACK_MESSAGE``, ``UNKNOW``), either on
  its own or in answer to a check (``fromTransactionCheck``).
- :class:`OpRecord`: an entry of ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, where RocketMQ notes that
  a half message was committed or rolled back so the checker skips it; here it also notes
  checks sent and half messages given up on.
- :class:`CheckRequest`: the ``CHECK_TRANSACTION_STATE`` request the broker sends to a
  producer of the group, carrying the half message for ``checkLocalTransaction``.
- :class:`ScheduledMessage`: a delayed message parked in ``SCHEDULE_TOPIC_XXXX`` (queue
  ``level - 1``) until its delay level elapses, then restored to its real topic.

Timestamps are ``int`` milliseconds since the Unix epoch (the schemas mark them
``timestamp-millis``). Every field is keyword-only, since several neighbours share a type
(``half_partition``/``half_offset``, ``tags``/``keys``) and a swap would go unnoticed.

Known gaps: the records hold what the adapter needs, not RocketMQ's full message header:
no store host, born host, commit-log offset, sys flag or body CRC; ``queue_id`` is the
Kafka partition. Field values are checked against the Avro types when encoded, not against
RocketMQ's rules (topic names, delay-level range, ``check_times >= 0``); callers check
those. ``properties`` is a plain ``dict``: the dataclasses are frozen but the map inside is
not, so do not mutate it after building a record (it is left out of ``hash()``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "TransactionDecision",
    "OpKind",
    "HalfMessage",
    "EndTransaction",
    "OpRecord",
    "CheckRequest",
    "ScheduledMessage",
    "Record",
    "RECORD_TYPES",
]


class TransactionDecision(enum.Enum):
    """A producer's local-transaction state (RocketMQ ``LocalTransactionState``)."""

    COMMIT = "COMMIT"
    """``COMMIT_MESSAGE``: deliver the half message to its real topic."""
    ROLLBACK = "ROLLBACK"
    """``ROLLBACK_MESSAGE``: drop the half message."""
    UNKNOWN = "UNKNOWN"
    """``UNKNOW``: not decided yet; the broker will check again later."""


class OpKind(enum.Enum):
    """What an :class:`OpRecord` says happened to a half message."""

    COMMIT = "COMMIT"
    """The transaction was committed and the message delivered."""
    ROLLBACK = "ROLLBACK"
    """The transaction was rolled back and the message dropped."""
    CHECK = "CHECK"
    """A transaction check was sent to the producer group."""
    DISCARD = "DISCARD"
    """The checker gave up on the half message (too many checks, or it expired)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HalfMessage:
    """A prepared transactional message (an entry of ``RMQ_SYS_TRANS_HALF_TOPIC``)."""

    transaction_id: str
    """The message's ``UNIQ_KEY`` property."""
    producer_group: str
    """The producer group that sent it; checks are addressed to this group."""
    topic: str
    """The real RocketMQ topic name, as the user wrote it (not the encoded Kafka name)."""
    queue_id: int
    """The queue (Kafka partition) chosen by the producer, or ``-1`` for any."""
    tags: str | None
    """The ``TAGS`` property, or ``None``."""
    keys: str | None
    """The ``KEYS`` property, or ``None``."""
    properties: dict[str, str] = field(hash=False)
    """Every other property, user and system."""
    body: bytes
    """The message body."""
    born_timestamp: int
    """When the producer created the message, epoch milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransaction:
    """A producer's decision on a half message (RocketMQ ``END_TRANSACTION``)."""

    transaction_id: str
    """The half message's ``UNIQ_KEY`` property."""
    producer_group: str
    """The producer group that sent the half message."""
    half_partition: int
    """The half-topic partition holding the half message."""
    half_offset: int
    """The half message's offset in that partition."""
    decision: TransactionDecision
    """Commit, roll back, or not known yet."""
    from_check: bool
    """True when answering a transaction check."""
    check_times: int = 0
    """Which check this answers (1 for the first), 0 for the producer's own decision."""
    remark: str | None = None
    """A free-text note from the producer, or ``None``."""
    timestamp: int
    """When the decision was sent, epoch milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpRecord:
    """An operation on a half message (an entry of ``RMQ_SYS_TRANS_OP_HALF_TOPIC``)."""

    transaction_id: str
    """The half message's ``UNIQ_KEY`` property."""
    half_partition: int
    """The half-topic partition holding the half message."""
    half_offset: int
    """The half message's offset in that partition."""
    kind: OpKind
    """What happened."""
    check_times: int
    """How many checks had been sent when it happened."""
    producer_group: str
    """The producer group that sent the half message."""
    reason: str | None = None
    """Why it happened, or ``None``."""
    timestamp: int
    """When it was recorded, epoch milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckRequest:
    """A transaction check for a producer group (RocketMQ ``CHECK_TRANSACTION_STATE``)."""

    transaction_id: str
    """The half message's ``UNIQ_KEY`` property."""
    producer_group: str
    """The producer group asked to check."""
    half_partition: int
    """The half-topic partition holding the half message."""
    half_offset: int
    """The half message's offset in that partition."""
    check_times: int
    """Which check this is (1 for the first)."""
    topic: str
    """The half message's real RocketMQ topic name."""
    queue_id: int
    """The half message's queue, or ``-1`` for any."""
    tags: str | None
    """The half message's ``TAGS``, or ``None``."""
    keys: str | None
    """The half message's ``KEYS``, or ``None``."""
    properties: dict[str, str] = field(hash=False)
    """Every other property of the half message."""
    body: bytes
    """The half message's body."""
    born_timestamp: int
    """When the producer created the half message, epoch milliseconds."""
    requested_at: int
    """When the checker issued the request, epoch milliseconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledMessage:
    """A delayed message waiting in ``SCHEDULE_TOPIC_XXXX``."""

    level: int
    """The delay level, 1-based (RocketMQ ``DELAY`` property)."""
    topic: str
    """The real RocketMQ topic to deliver to (``REAL_TOPIC``)."""
    queue_id: int
    """The queue to deliver to (``REAL_QID``), or ``-1`` for any."""
    key: bytes | None
    """The Kafka record key to restore, or ``None``."""
    tags: str | None
    """The ``TAGS`` property, or ``None``."""
    keys: str | None
    """The ``KEYS`` property, or ``None``."""
    properties: dict[str, str] = field(hash=False)
    """Every other property, user and system."""
    body: bytes
    """The message body."""
    born_timestamp: int
    """When the producer created the message, epoch milliseconds."""
    unique_key: str
    """The message's ``UNIQ_KEY`` property."""
    reconsume_times: int = 0
    """How many times the message was sent back for retry (``RECONSUME_TIME``)."""


Record = HalfMessage | EndTransaction | OpRecord | CheckRequest | ScheduledMessage
"""Any record of a system topic."""

RECORD_TYPES: tuple[type[Record], ...] = (
    HalfMessage,
    EndTransaction,
    OpRecord,
    CheckRequest,
    ScheduledMessage,
)
"""Every record class; each has a schema ``schemas/<ClassName>.avsc``."""
