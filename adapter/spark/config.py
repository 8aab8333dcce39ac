"""The settings of one Spark job run, frozen, from command-line options or the environment.

Not a RocketMQ behaviour: this is where a job learns its Kafka cluster (RocketMQ's name server
address becomes the bootstrap servers), its topics (RocketMQ names, encoded for Kafka by
:mod:`adapter.naming` when the source subscribes), where its checkpoint and Delta table live,
its trigger, and the Spark master it runs on.

Environment (read by :meth:`SparkJobConfig.from_env`, never at import):

- ``RMQ_ADAPTER_BOOTSTRAP``: Kafka bootstrap servers.
- ``RMQ_ADAPTER_SPARK_MASTER`` (``local[2]``), ``RMQ_ADAPTER_SPARK_CHECKPOINT``,
  ``RMQ_ADAPTER_SPARK_TABLE``, ``RMQ_ADAPTER_SPARK_TRIGGER_MS``,
  ``RMQ_ADAPTER_SPARK_AVAILABLE_NOW`` (``1``/``true``), ``RMQ_ADAPTER_SPARK_TOPICS`` (RocketMQ
  topic names, comma separated), ``RMQ_ADAPTER_SPARK_JARS`` (the directory of the extra jars),
  ``RMQ_ADAPTER_SPARK_DRIVER_MEMORY`` (``1g``), ``RMQ_ADAPTER_SPARK_JAVA_OPTIONS`` (JVM
  options of the driver and executors; default ``-XX:+UseParallelGC``, whose MERGEs measured as
  fast as G1's or ~10 % faster on two cores (BENCHMARKS.md), and for an ``--available-now`` run
  ``-XX:+UseSerialGC -XX:TieredStopAtLevel=1``, which shortens its cold start and cuts its
  memory), ``RMQ_ADAPTER_DELAY_LEVELS`` (telemetry: the delay of each level).
- ``RMQ_ADAPTER_KAFKA_<KEY>``: a Kafka client setting, passed to Spark's Kafka source as
  ``kafka.<key>`` (``RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL=SSL`` -> ``kafka.security.protocol``).
  Spark's source is the Java client: the SASL and TLS settings whose names differ
  (``sasl.username``/``sasl.password``, ``ssl.ca.location``, ...) are mapped to the Java ones
  (:mod:`adapter.spark.java_settings`), so one set of settings serves every process.

Known gaps: one Kafka cluster per job; topics are fixed at start (no pattern subscription for
the points job).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from adapter.config import kafka_overrides
from adapter.exceptions import ConfigError
from adapter.spark.java_settings import java_settings

ENV = "RMQ_ADAPTER_"
ENV_BOOTSTRAP = ENV + "BOOTSTRAP"
ENV_DELAY_LEVELS = ENV + "DELAY_LEVELS"
ENV_SPARK = ENV + "SPARK_"

DEFAULT_MASTER = "local[2]"
DEFAULT_STATE_DIR = Path(".rmq-spark")
DEFAULT_POINTS_TOPIC = "OrderPaid"


class Job(StrEnum):
    POINTS = "points"
    TELEMETRY = "telemetry"
    INDEX = "index"


DEFAULT_TRIGGER_MS = {Job.POINTS: 250, Job.TELEMETRY: 5000, Job.INDEX: 5000}
DEFAULT_MAX_OFFSETS_PER_TRIGGER = {Job.POINTS: 100_000}
"""The points job merges each batch from its driver (:mod:`adapter.spark.ledger`), so a backlog
is read in batches of at most this many records."""
"""The points job credits within a second of a commit; telemetry is a dashboard, 5 s is plenty;
the message index is read with a scan of what is newer, so 5 s is plenty there too."""


def _truthy(value: str) -> bool:
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _topics(value: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in value.replace(";", ",").split(",") if t.strip())


def kafka_options_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``RMQ_ADAPTER_KAFKA_<KEY>`` settings as Spark Kafka source options (``kafka.<key>``),
    librdkafka's SASL and TLS names mapped to the Java client's (:mod:`.java_settings`)."""
    settings = java_settings(kafka_overrides(environ))
    return {f"kafka.{key}": value for key, value in settings.items()}


DEFAULT_JAVA_OPTIONS = "-XX:+UseParallelGC"
SHORT_RUN_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""An ``--available-now`` run lasts seconds: the C1 compiler alone warms up faster, and the
serial collector keeps the heap compact (BENCHMARKS.md: the telemetry job in 2/3 of the time
and 2/3 of the memory); a continuous run keeps C2 and the parallel collector."""


@dataclass(frozen=True, slots=True)
class SparkJobConfig:
    """Everything one run of a job needs; build it with :meth:`from_env` (options win)."""

    job: Job
    bootstrap: str
    """Kafka bootstrap servers."""
    checkpoint: Path
    """The streaming checkpoint directory (offsets and commits of the query)."""
    table: Path
    """The Delta table (points: the ledger) or the directory of the telemetry tables."""
    master: str = DEFAULT_MASTER
    """``local[2]`` or a cluster URL such as ``spark://127.0.0.1:7077``."""
    trigger_ms: int = 500
    """Processing-time trigger interval, when not ``available_now``."""
    available_now: bool = False
    """Process what is in Kafka now (in one or more batches), then stop."""
    topics: tuple[str, ...] = ()
    """RocketMQ topic names to read. Empty for telemetry and the index: every real topic (a
    pattern)."""
    jars_dir: Path | None = None
    """The extra jars (``infra/.jars/spark``); ``None``: ``RMQ_ADAPTER_SPARK_JARS`` or the
    checkout's ``infra/.jars/spark``."""
    driver_memory: str = "1g"
    java_options: str = DEFAULT_JAVA_OPTIONS
    """JVM options for the driver and the executors."""
    delay_levels: str | None = None
    """RocketMQ ``messageDelayLevel`` (telemetry); ``None``: the adapter's default levels."""
    starting_offsets: str = "earliest"
    """Where a new checkpoint starts: ``earliest`` (everything retained) or ``latest``."""
    max_offsets_per_trigger: int | None = None
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    """Extra Kafka source options (``kafka.security.protocol``, ...)."""

    def __post_init__(self) -> None:
        if not self.bootstrap.strip():
            raise ConfigError(
                f"no Kafka bootstrap servers: pass --bootstrap or set {ENV_BOOTSTRAP}"
            )
        if self.trigger_ms <= 0:
            raise ConfigError(f"trigger interval must be positive, got {self.trigger_ms} ms")
        if self.starting_offsets not in ("earliest", "latest"):
            raise ConfigError(
                f"starting offsets must be earliest or latest, got {self.starting_offsets!r}"
            )
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger <= 0:
            raise ConfigError("max offsets per trigger must be positive")
        if self.job is Job.POINTS and not self.topics:
            raise ConfigError("the points job needs a topic (--topic)")

    @property
    def bootstrap_servers(self) -> str:
        """RocketMQ-style ``;`` separators as Kafka's ``,``."""
        return ",".join(s.strip() for s in self.bootstrap.replace(";", ",").split(",") if s.strip())

    def with_(self, **changes: Any) -> SparkJobConfig:
        return replace(self, **changes)

    @classmethod
    def from_env(
        cls,
        job: Job | str,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> SparkJobConfig:
        """Settings from ``environ`` (default ``os.environ``), overridden by ``options`` that
        are not ``None`` (the command line's values)."""
        env = os.environ if environ is None else environ
        job = Job(job)
        state = DEFAULT_STATE_DIR / job.value

        def pick(name: str, env_name: str, convert: Any = str, default: Any = None) -> Any:
            if options.get(name) is not None:
                return options[name]
            raw = env.get(ENV_SPARK + env_name)
            if raw is None or raw == "":
                return default
            try:
                return convert(raw)
            except ValueError as exc:
                raise ConfigError(f"{ENV_SPARK + env_name}={raw!r}: {exc}") from None

        default_topics = (DEFAULT_POINTS_TOPIC,) if job is Job.POINTS else ()
        topics = pick("topics", "TOPICS", _topics, default_topics)
        jars = pick("jars_dir", "JARS", Path)
        available_now = pick("available_now", "AVAILABLE_NOW", _truthy, False)
        default_java = SHORT_RUN_JAVA_OPTIONS if available_now else DEFAULT_JAVA_OPTIONS
        kafka_options = kafka_options_from_env(env)
        kafka_options.update(options.get("kafka_options") or {})
        return cls(
            job=job,
            bootstrap=options.get("bootstrap") or env.get(ENV_BOOTSTRAP, ""),
            checkpoint=Path(pick("checkpoint", "CHECKPOINT", Path, state / "checkpoint")),
            table=Path(pick("table", "TABLE", Path, state / "table")),
            master=pick("master", "MASTER", str, DEFAULT_MASTER),
            trigger_ms=pick("trigger_ms", "TRIGGER_MS", int, DEFAULT_TRIGGER_MS[job]),
            available_now=available_now,
            topics=tuple(topics),
            jars_dir=Path(jars) if jars is not None else None,
            driver_memory=pick("driver_memory", "DRIVER_MEMORY", str, "1g"),
            java_options=pick("java_options", "JAVA_OPTIONS", str, default_java),
            delay_levels=options.get("delay_levels") or env.get(ENV_DELAY_LEVELS) or None,
            starting_offsets=pick("starting_offsets", "STARTING_OFFSETS", str, "earliest"),
            max_offsets_per_trigger=pick(
                "max_offsets_per_trigger",
                "MAX_OFFSETS_PER_TRIGGER",
                int,
                DEFAULT_MAX_OFFSETS_PER_TRIGGER.get(job),
            ),
            kafka_options=kafka_options,
        )
