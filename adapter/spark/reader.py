"""The streaming wiring: Spark's Kafka source on the real topics or the system topics.

Reproduces a RocketMQ consumer's view of its topics for a Spark job: only committed messages
(``kafka.isolation.level=read_committed``, so a rolled-back or aborted transaction, and a
forwarder's or coordinator's aborted batch, are never seen), every property
(``includeHeaders=true``), from the earliest retained message for a new checkpoint (a new
RocketMQ consumer group on a young queue), resuming from the checkpoint afterwards. The column
logic is in :mod:`adapter.spark.columns` and :mod:`adapter.spark.system_topics` (pure
transforms); this module only builds the sources.

Known gaps: Spark's source keeps its own offsets in the checkpoint, not in a Kafka consumer
group, so ``rmq-adapter status`` does not show a Spark job's backlog. Without ``--topic`` the
telemetry job subscribes to every real topic by pattern; topics created later are picked up
when the Kafka client refreshes its metadata (5 minutes by default).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession

from adapter import naming
from adapter.spark.columns import rocketmq_columns
from adapter.spark.config import SparkJobConfig
from adapter.spark.system_topics import SYSTEM_RECORDS, decode_system
from adapter.wire.records import Record

REAL_TOPICS_PATTERN = (
    r"^(?!__|RMQ_SYS_|SCHEDULE_TOPIC_XXXX$|TRANS_CHECK_MAX_TIME_TOPIC$|\.25CHECK\.25).+"
)
"""Every Kafka topic but Kafka's own (``__consumer_offsets``, ``__transaction_state``), the
adapter's system topics and the check topics (``%CHECK%<group>``, which hold Avro requests)."""


SOURCE_DEFAULTS = {"kafka.fetch.max.wait.ms": "10"}
"""Kafka client settings of the source, overridable with ``RMQ_ADAPTER_KAFKA_*``.

``fetch.max.wait.ms``: an executor reading a batch's offset range polls once more at its end
(the range's last offset is often a transaction marker, or the log end), and the broker holds
that poll until data arrives or this much time passes: 500 ms by default, for every partition
of every batch. 10 ms makes a batch of a few records over 8 partitions read in 0.6 s instead
of 2.5 s."""


def kafka_source(
    spark: SparkSession,
    config: SparkJobConfig,
    *,
    topics: Iterable[str] = (),
    pattern: str | None = None,
) -> DataFrame:
    """Spark's Kafka source on RocketMQ ``topics`` (encoded for Kafka here) or a Kafka topic
    name ``pattern``: committed records only, with their headers."""
    names = [naming.kafka_topic(t) for t in topics]
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .option("startingOffsets", config.starting_offsets)
    )
    if names:
        reader = reader.option("subscribe", ",".join(names))
    elif pattern is not None:
        reader = reader.option("subscribePattern", pattern)
    else:
        raise ValueError("kafka_source needs topics or a pattern")
    if config.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
    for key, value in {**SOURCE_DEFAULTS, **config.kafka_options}.items():
        reader = reader.option(key, value)
    return reader.load()


def read_messages(
    spark: SparkSession, config: SparkJobConfig, topics: Iterable[str] | None = None
) -> DataFrame:
    """The real topics as RocketMQ messages (:data:`adapter.spark.columns.MESSAGE_COLUMNS`):
    ``topics`` (RocketMQ names), else the config's, else every real topic."""
    chosen = tuple(config.topics if topics is None else topics)
    if chosen:
        return rocketmq_columns(kafka_source(spark, config, topics=chosen))
    return rocketmq_columns(kafka_source(spark, config, pattern=REAL_TOPICS_PATTERN))


def read_system(spark: SparkSession, config: SparkJobConfig, topic: str) -> DataFrame:
    """A system topic's records decoded by spark-avro (``record`` and ``error`` columns)."""
    record_type: type[Record] = SYSTEM_RECORDS[topic]
    return decode_system(kafka_source(spark, config, topics=[topic]), record_type)
