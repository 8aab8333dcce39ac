"""The telemetry job's facts: one row per event the adapter left in Kafka (pure transforms).

Reproduces nothing of RocketMQ by itself: the inputs of :mod:`adapter.spark.telemetry`. Each
source row becomes a fact of :data:`FACT_SCHEMA` whose ``fact_key`` is the event's identity, so
a replayed batch adds nothing:

- ``scheduled``: a ``SCHEDULE_TOPIC_XXXX`` record of a delayed message (its level, its append
  time: the broker's clock);
- ``delivered``: a real-topic record the schedule forwarder delivered (it carries
  ``REAL_TOPIC``), a delayed message, a retry or a timer message;
- ``timer``: a delivered timer message (``TIMER_DELIVER_MS``): ``event_ts`` is its deliver
  time, ``level`` its band (:data:`TIMER_BANDS_MS`, by how far ahead it was set);
- ``half`` and ``op``: each half message stored, each COMMIT, ROLLBACK, CHECK and DISCARD a
  coordinator applied;
- ``undecodable``: a system record that did not decode, with the reason.

Known gaps: a timer message set in the past is sent at once by its producer, as a plain
message: it is not a ``timer`` fact.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

from adapter import naming
from adapter import properties as prop
from adapter.spark.config import SparkJobConfig
from adapter.spark.reader import read_messages, read_system

SCHEDULED, DELIVERED, TIMER, HALF, OP, UNDECODABLE = (
    "scheduled",
    "delivered",
    "timer",
    "half",
    "op",
    "undecodable",
)
TERMINAL_OPS = ("COMMIT", "ROLLBACK", "DISCARD")

FACT_SCHEMA = StructType(
    [
        StructField("fact_key", StringType(), False),
        StructField("kind", StringType(), False),
        StructField("msg_id", StringType(), True),
        StructField("reconsume_times", IntegerType(), True),
        StructField("topic", StringType(), True),
        StructField("level", IntegerType(), True),
        StructField("op", StringType(), True),
        StructField("producer_group", StringType(), True),
        StructField("check_times", IntegerType(), True),
        StructField("event_ts", TimestampType(), True),
        StructField("error", StringType(), True),
    ]
)
"""One event: ``msg_id`` is the message id (the transaction id for ``half`` and ``op``)."""


def _fact(**columns: Column) -> Column:
    """One fact as a struct of :data:`FACT_SCHEMA` (columns not given are null)."""
    return F.struct(
        *[
            (columns[f.name] if f.name in columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in FACT_SCHEMA.fields
        ]
    )


def _facts(rows: DataFrame, **columns: Column) -> DataFrame:
    """``rows`` projected onto :data:`FACT_SCHEMA` (columns not given are null)."""
    return rows.select(_fact(**columns).alias("fact")).select("fact.*")


def _key(*parts: Column | str) -> Column:
    return F.concat_ws("|", *[F.lit(p) if isinstance(p, str) else p.cast("string") for p in parts])


def _or_undecodable(rows: DataFrame, kind: str, key: Column, **columns: Column) -> DataFrame:
    """System-topic rows as facts of ``kind``; a row whose value did not decode becomes an
    ``undecodable`` fact instead (its reason, its system topic, its position as the key).
    One pass over the rows: the source is read once."""
    bad = F.col("error").isNotNull()
    position = _key(UNDECODABLE, F.col("topic"), F.col("queue_id"), F.col("queue_offset"))
    chosen = {name: F.when(~bad, value) for name, value in columns.items()}
    chosen["fact_key"] = F.when(bad, position).otherwise(key)
    chosen["kind"] = F.when(bad, F.lit(UNDECODABLE)).otherwise(F.lit(kind))
    chosen["error"] = F.col("error")
    chosen["topic"] = F.when(bad, F.col("topic")).otherwise(columns.get("topic", F.lit(None)))
    chosen["event_ts"] = F.when(bad, F.col("store_timestamp")).otherwise(
        columns.get("event_ts", F.col("store_timestamp"))
    )
    return _facts(rows, **chosen)


def scheduled_facts(schedule: DataFrame) -> DataFrame:
    """Decoded ``SCHEDULE_TOPIC_XXXX`` rows (:mod:`adapter.spark.system_topics`) as facts."""
    r = F.col("record")
    return _or_undecodable(
        schedule,
        SCHEDULED,
        _key(SCHEDULED, r.unique_key, r.reconsume_times, r.topic),
        msg_id=r.unique_key,
        reconsume_times=r.reconsume_times,
        topic=r.topic,
        level=r.level,
        event_ts=F.col("store_timestamp"),
    )


TIMER_BANDS_MS = (1_000, 10_000, 60_000, 600_000, 3_600_000, 86_400_000)
"""Bounds of the timer bands, by how far ahead a timer was set (deliver time - born time)."""
TIMER_BANDS = ("< 1s", "1-10s", "10s-1m", "1-10m", "10m-1h", "1h-1d", ">= 1d")
"""Band ``i`` of a timer: the bounds it reached (:data:`TIMER_BANDS_MS`)."""


def delivered_facts(messages: DataFrame) -> DataFrame:
    """Reader rows of messages the schedule forwarder delivered (they carry ``REAL_TOPIC``) as
    ``delivered`` facts, and those of timer messages (``TIMER_DELIVER_MS``) as ``timer``
    facts too: one pass over the rows, so the source is read once."""
    forwarded = messages.where(F.col("properties").getItem(prop.REAL_TOPIC).isNotNull())
    identity = (F.col("msg_id"), F.col("reconsume_times"), F.col("topic"))
    same = {"msg_id": identity[0], "reconsume_times": identity[1], "topic": identity[2]}
    delivered = _fact(
        fact_key=_key(DELIVERED, *identity),
        kind=F.lit(DELIVERED),
        event_ts=F.col("store_timestamp"),
        **same,
    )
    due_ms = F.col("properties").getItem(prop.TIMER_DELIVER_MS).cast("bigint")
    ahead = due_ms - F.unix_millis(F.col("born_timestamp"))
    band = reduce(
        lambda total, bound: total + F.when(ahead >= bound, 1).otherwise(0),
        TIMER_BANDS_MS,
        F.lit(0),
    )
    timer = F.when(
        due_ms.isNotNull(),
        _fact(
            fact_key=_key(TIMER, *identity),
            kind=F.lit(TIMER),
            level=band,
            event_ts=F.timestamp_millis(due_ms),
            **same,
        ),
    )
    both = forwarded.select(F.explode(F.array(delivered, timer)).alias("fact"))
    return both.where(F.col("fact").isNotNull()).select("fact.*")


def half_facts(halves: DataFrame) -> DataFrame:
    """Decoded ``RMQ_SYS_TRANS_HALF_TOPIC`` rows as facts (one per half message stored)."""
    r = F.col("record")
    return _or_undecodable(
        halves,
        HALF,
        _key(HALF, F.col("queue_id"), F.col("queue_offset")),
        msg_id=r.transaction_id,
        topic=r.topic,
        producer_group=r.producer_group,
        event_ts=F.col("store_timestamp"),
    )


def op_facts(ops: DataFrame) -> DataFrame:
    """Decoded ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` rows as facts (one per operation applied)."""
    r = F.col("record")
    return _or_undecodable(
        ops,
        OP,
        _key(OP, r.transaction_id, r.kind, r.half_partition, r.half_offset, r.check_times),
        msg_id=r.transaction_id,
        op=r.kind,
        producer_group=r.producer_group,
        check_times=r.check_times,
        event_ts=r.timestamp,
    )


def telemetry_facts(spark: SparkSession, config: SparkJobConfig) -> DataFrame:
    """The streaming union of every fact source (the real topics and three system topics)."""
    schedule = read_system(spark, config, naming.SCHEDULE_TOPIC)
    halves = read_system(spark, config, naming.TRANS_HALF_TOPIC)
    ops = read_system(spark, config, naming.TRANS_OP_TOPIC)
    parts = [
        delivered_facts(read_messages(spark, config)),
        scheduled_facts(schedule),
        half_facts(halves),
        op_facts(ops),
    ]
    return reduce(DataFrame.unionByName, parts)
