"""The settings every part shares, read from the environment at run time (never at import).

Where Kafka is (:class:`KafkaSettings`), the librdkafka settings every producer and every group
consumer of the adapter starts from, RocketMQ's defaults that more than one part uses, and the
``RMQ_ADAPTER_*`` variables read across parts. Each part keeps its own settings object next to
its code: ``producer.config``, ``consumer.config``, ``kafka.worker_config``, ``schedule.config``
and ``transaction.config``; the fast path's timing contract is ``transaction.timing``.

Environment (read by ``from_env`` and the ``*_from_env`` helpers):

- ``RMQ_ADAPTER_BOOTSTRAP``: Kafka bootstrap servers when the code did not call
  ``set_name_server_address``.
- ``RMQ_ADAPTER_KAFKA_<KEY>``: any librdkafka setting, the key upper-cased with ``.`` written
  as ``_`` (``RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL=SASL_SSL`` sets ``security.protocol``). This
  is the escape hatch for security and tuning: a key librdkafka does not know is ignored with
  a warning, and one the exactly-once delivery depends on is refused (:mod:`adapter.kafka_env`).
- ``RMQ_ADAPTER_FAST_COMMIT``: ``0`` sends a transactional producer's decisions through the
  coordinator instead of committing them in the producer's own Kafka transactions.
- ``RMQ_ADAPTER_DELAY_LEVELS``: RocketMQ's ``messageDelayLevel``.

Known gaps: RocketMQ's name-server domain, ACL credentials and trace settings have no Kafka
meaning here; their setters are accepted and ignored, with a warning.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapter.delay import DEFAULT_LEVELS, DelayLevels
from adapter.exceptions import ConfigError
from adapter.kafka_env import ENV_KAFKA_PREFIX as ENV_KAFKA_PREFIX
from adapter.kafka_env import kafka_overrides as kafka_overrides
from adapter.kafka_env import librdkafka_overrides, masked, refuse_exactly_once_override

ENV_PREFIX = "RMQ_ADAPTER_"
ENV_BOOTSTRAP = ENV_PREFIX + "BOOTSTRAP"
ENV_FAST_COMMIT = ENV_PREFIX + "FAST_COMMIT"
ENV_DELAY_LEVELS = ENV_PREFIX + "DELAY_LEVELS"

DEFAULT_SEND_TIMEOUT_MS = 3000
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


# Every producer of the adapter waits for all in-sync replicas and never writes a record twice;
# the room above the largest body is for headers and batch overhead.
SAFE_PRODUCER: Mapping[str, Any] = {"enable.idempotence": True, "acks": "all"}
HEADROOM = 64 * 1024

CONCURRENT_TRANSACTIONS_BACKOFF_MS = 5
"""``retry.backoff.ms`` of every transactional producer. A producer that starts its next
transaction right after a commit, while the broker still writes that commit's markers, is told
"concurrent transactions" (by ``send_offsets_to_transaction`` or the first produce), and
librdkafka asks again after this backoff, doubling it each time: 100 ms by default, which made
every other forwarder transaction take about 100 ms in a burst of delayed messages."""

# Every group consumer of the adapter: offsets committed by the adapter itself, only committed
# records read, new groups from the earliest record, cooperative rebalancing.
GROUP_CONSUMER: Mapping[str, Any] = {
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


def fast_commit_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """``RMQ_ADAPTER_FAST_COMMIT``: 0, false or no turns the transactional fast path off."""
    env = os.environ if environ is None else environ
    return env.get(ENV_FAST_COMMIT, "1").strip().lower() not in ("0", "false", "no", "off")


def delay_levels_from_env(environ: Mapping[str, str] | None = None) -> DelayLevels:
    """RocketMQ's ``messageDelayLevel`` from ``RMQ_ADAPTER_DELAY_LEVELS`` (default: 18 levels)."""
    env = os.environ if environ is None else environ
    return DelayLevels.parse(env.get(ENV_DELAY_LEVELS) or DEFAULT_LEVELS)


def default_worker_id() -> str:
    """Unique per process. Give a worker a stable ``--worker-id`` (e.g. a StatefulSet pod
    name) so that its successor fences it and aborts its open transaction at once, instead of
    waiting for the transaction timeout."""
    return f"{socket.gethostname()}-{os.getpid()}"


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
