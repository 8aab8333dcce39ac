"""Frozen settings, one object per process kind, read from the environment at run time.

Reproduces the knobs of RocketMQ's ``DefaultMQProducer`` / ``DefaultMQPushConsumer`` that
rocketmq-client-python 2.0 exposes (send timeout 3000 ms, max message size 4 MiB, consume
thread count 20, ...) with RocketMQ's defaults, and turns them into librdkafka settings.

Environment (read by ``from_env``, never at import):

- ``RMQ_ADAPTER_BOOTSTRAP``: Kafka bootstrap servers when the code did not call
  ``set_name_server_address``.
- ``RMQ_ADAPTER_KAFKA_<KEY>``: any librdkafka setting, the key upper-cased with ``.`` written
  as ``_`` (``RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL=SASL_SSL`` sets ``security.protocol``). This
  is the escape hatch for security and tuning: a key librdkafka does not know is ignored with
  a warning, and one the exactly-once delivery depends on is refused (:mod:`adapter.kafka_env`).
- ``RMQ_ADAPTER_FAST_COMMIT``: ``0`` sends a transactional producer's decisions through the
  coordinator instead of committing them in the producer's own Kafka transactions.

Known gaps: RocketMQ's name-server domain, ACL credentials and trace settings have no Kafka
meaning here; their setters are accepted and ignored, with a warning.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar

from adapter import naming
from adapter.delay import DEFAULT_LEVELS, DelayLevels
from adapter.exceptions import ConfigError
from adapter.kafka_env import ENV_KAFKA_PREFIX as ENV_KAFKA_PREFIX
from adapter.kafka_env import kafka_overrides as kafka_overrides
from adapter.kafka_env import librdkafka_overrides, masked, refuse_exactly_once_override

ENV_PREFIX = "RMQ_ADAPTER_"
ENV_BOOTSTRAP = ENV_PREFIX + "BOOTSTRAP"
ENV_FAST_COMMIT = ENV_PREFIX + "FAST_COMMIT"

DEFAULT_SEND_TIMEOUT_MS = 3000
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
DEFAULT_CONSUME_THREADS = 20
DEFAULT_SUSPEND_MS = 1000
DEFAULT_LOCAL_RETRY_MS = 5000
DEFAULT_MAX_IN_FLIGHT_PER_QUEUE = 1000
DEFAULT_COMMIT_INTERVAL_MS = 1000
DEFAULT_MAX_RECONSUME_TIMES = 16


# Every producer of the adapter waits for all in-sync replicas and never writes a record twice;
# the room above the largest body is for headers and batch overhead.
_SAFE_PRODUCER: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
_HEADROOM = 64 * 1024

CONCURRENT_TRANSACTIONS_BACKOFF_MS = 5
"""``retry.backoff.ms`` of every transactional producer. A producer that starts its next
transaction right after a commit, while the broker still writes that commit's markers, is told
"concurrent transactions" (by ``send_offsets_to_transaction`` or the first produce), and
librdkafka asks again after this backoff, doubling it each time: 100 ms by default, which made
every other forwarder transaction take about 100 ms in a burst of delayed messages."""

# Every group consumer of the adapter: offsets committed by the adapter itself, only committed
# records read, new groups from the earliest record, cooperative rebalancing.
_GROUP_CONSUMER: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "enable.partition.eof": False,
    "partition.assignment.strategy": "cooperative-sticky",
    "session.timeout.ms": 10000,
    "heartbeat.interval.ms": 1000,
    "fetch.wait.max.ms": 100,
}


class MessageModel(IntEnum):
    """``rocketmq.ffi.MessageModel``."""

    BROADCASTING = 0
    CLUSTERING = 1


def fast_commit_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """``RMQ_ADAPTER_FAST_COMMIT``: 0, false or no turns the transactional fast path off."""
    env = os.environ if environ is None else environ
    return env.get(ENV_FAST_COMMIT, "1").strip().lower() not in ("0", "false", "no", "off")


class NoBootstrapError(ConfigError):
    """Neither the code nor ``RMQ_ADAPTER_BOOTSTRAP`` names the Kafka bootstrap servers."""


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """Where Kafka is and any extra librdkafka settings (never one the adapter's exactly-once
    delivery depends on: :data:`adapter.kafka_env.EXACTLY_ONCE`)."""

    bootstrap_servers: str
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in self.extra:
            refuse_exactly_once_override(key, f"the Kafka setting {key!r}")

    def __repr__(self) -> str:
        return f"KafkaSettings({self.bootstrap_servers!r}, extra={masked(self.extra)!r})"

    @classmethod
    def from_env(
        cls, bootstrap: str | None = None, environ: Mapping[str, str] | None = None
    ) -> KafkaSettings:
        """The servers from the code or ``RMQ_ADAPTER_BOOTSTRAP``, and the librdkafka settings
        of the ``RMQ_ADAPTER_KAFKA_*`` variables (:mod:`adapter.kafka_env`)."""
        env = os.environ if environ is None else environ
        servers = bootstrap or env.get(ENV_BOOTSTRAP, "")
        if not servers:
            raise NoBootstrapError(
                "no Kafka bootstrap servers: call set_name_server_address('host:port') "
                f"or set {ENV_BOOTSTRAP}"
            )
        # RocketMQ name-server lists are ';'-separated; Kafka's are ','-separated.
        servers = ",".join(s.strip() for s in servers.replace(";", ",").split(",") if s.strip())
        return cls(servers, librdkafka_overrides(env))

    def librdkafka(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        conf.update(settings)
        conf.update(self.extra)
        return conf


FAST_COMMIT_WINDOW_MS = 1_000
"""A producer commits a decision in its own Kafka transaction (the fast path) only when every
record of that transaction was acknowledged within this long of the half message's birth; later
decisions go through the coordinator."""
FAST_COMMIT_TRANSACTION_TIMEOUT_MS = 5_000
"""Kafka's ``transaction.timeout.ms`` for the fast path's producers."""
CLOCK_SKEW_ALLOWANCE_MS = 500
"""How far the clocks of producers and coordinators may disagree without harm."""
EARLIEST_CHECK_MS = FAST_COMMIT_WINDOW_MS + CLOCK_SKEW_ALLOWANCE_MS
"""The coordinator never checks a half message earlier than this after its birth, whatever the
transaction timeout: a fast-path decision may still be in flight until then."""


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

    def __post_init__(self) -> None:
        if self.group_commit_ms < 0:
            raise ConfigError(f"group commit time must be 0 or more, got {self.group_commit_ms}")
        if self.send_timeout_ms <= 0:
            raise ConfigError(f"send timeout must be positive, got {self.send_timeout_ms} ms")
        if self.max_message_size <= 0:
            raise ConfigError(f"max message size must be positive, got {self.max_message_size}")
        if self.compress_level is not None and not 0 <= self.compress_level <= 9:
            raise ConfigError(f"compress level must be 0..9, got {self.compress_level}")

    def _producer_settings(self, client_id: str, headroom: int) -> dict[str, Any]:
        """What every producer of an application shares: idempotent, acks from all replicas,
        the send timeout, the size limit (plus ``headroom`` for headers and envelopes) and
        the compression level."""
        settings: dict[str, Any] = {
            "client.id": client_id,
            **_SAFE_PRODUCER,
            "message.timeout.ms": self.send_timeout_ms,
            "request.timeout.ms": min(self.send_timeout_ms, 30000),
            "message.max.bytes": self.max_message_size + headroom,
        }
        if self.compress_level is not None:
            settings["compression.codec"] = "gzip"
            settings["compression.level"] = self.compress_level
        return settings

    def librdkafka(self) -> dict[str, Any]:
        settings = self._producer_settings(f"{self.group}@{self.instance_name}", _HEADROOM)
        return self.kafka.librdkafka({**settings, "linger.ms": 5})

    def group_committer(self, transactional_id: str) -> dict[str, Any]:
        """A transactional producer of the fast path: the application's settings, and a
        short transaction timeout, as its transactions last milliseconds and one left open
        by a dead process holds back what read_committed readers see until the broker
        aborts it. Its records carry the message and its END record: twice the headroom."""
        settings = self._producer_settings(transactional_id, 2 * _HEADROOM)
        return self.kafka.librdkafka(
            {
                **settings,
                "transactional.id": transactional_id,
                "transaction.timeout.ms": FAST_COMMIT_TRANSACTION_TIMEOUT_MS,
                # A group's records go out when the group is flushed (flush ignores the
                # linger): one produce request per group. 1 ms sent a request per millisecond
                # and kept librdkafka's threads busy: 2,000 transactions/s here against 3,000.
                "linger.ms": 100,
                "retry.backoff.ms": CONCURRENT_TRANSACTIONS_BACKOFF_MS,
            }
        )

    def check_consumer(self, check_topic: str) -> dict[str, Any]:
        """All producers of a group share one consumer group on the group's check topic."""
        return self.kafka.librdkafka(
            {
                "group.id": check_topic,
                "client.id": f"{self.group}@{self.instance_name}-checks",
                **_GROUP_CONSUMER,
                "session.timeout.ms": 6000,
            }
        )


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
            **_GROUP_CONSUMER,
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
            **_SAFE_PRODUCER,
            "linger.ms": 2,
            "message.timeout.ms": self.send_back_timeout_ms,
            "message.max.bytes": DEFAULT_MAX_MESSAGE_SIZE + _HEADROOM,
        }
        return self.kafka.librdkafka(settings)


ENV_DELAY_LEVELS = ENV_PREFIX + "DELAY_LEVELS"
DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS = 10_000


def delay_levels_from_env(environ: Mapping[str, str] | None = None) -> DelayLevels:
    """RocketMQ's ``messageDelayLevel`` from ``RMQ_ADAPTER_DELAY_LEVELS`` (default: 18 levels)."""
    env = os.environ if environ is None else environ
    return DelayLevels.parse(env.get(ENV_DELAY_LEVELS) or DEFAULT_LEVELS)


def default_worker_id() -> str:
    """Unique per process. Give a worker a stable ``--worker-id`` (e.g. a StatefulSet pod
    name) so that its successor fences it and aborts its open transaction at once, instead of
    waiting for the transaction timeout."""
    return f"{socket.gethostname()}-{os.getpid()}"


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
                **_SAFE_PRODUCER,
                "linger.ms": self.linger_ms,
                "retry.backoff.ms": CONCURRENT_TRANSACTIONS_BACKOFF_MS,
                "message.max.bytes": DEFAULT_MAX_MESSAGE_SIZE + _HEADROOM,
            }
        )

    def consumer(self, group: str) -> dict[str, Any]:
        return self.kafka.librdkafka(
            {
                "group.id": group,
                "client.id": self.transactional_id,
                **_GROUP_CONSUMER,
                **self.consumer_settings,
            }
        )


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

    def __post_init__(self) -> None:
        super(ForwarderConfig, self).__post_init__()
        if not 0 <= self.prepare_ahead_ms <= 1000:
            raise ConfigError(f"prepare-ahead must be 0 to 1000 ms, got {self.prepare_ahead_ms}")
        if self.missing_topic_grace_ms < 0:
            raise ConfigError(
                f"missing-topic grace must be 0 ms or more, got {self.missing_topic_grace_ms}"
            )


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
