"""Job 2, the adapter's telemetry: delay lateness per level, transaction outcomes and checks.

Reproduces the numbers a RocketMQ operator reads off the broker (the schedule service's delay
per level, the transaction check service's commits, rollbacks, checks and discards), computed
from what the adapter leaves in Kafka:

- ``SCHEDULE_TOPIC_XXXX`` (system reader): each delayed message's level and store time (the
  topic uses ``LogAppendTime``, so the broker's clock): due = store time + the level's delay;
- the real topics (message reader): the delivered copy (it carries ``REAL_TOPIC``) and when it
  was produced. A message and its delivery meet on (msg_id, reconsume_times, topic), so each
  retry of one message is its own delivery. lateness = delivered - due;
- ``RMQ_SYS_TRANS_HALF_TOPIC`` and ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (system reader): each half
  message, and each COMMIT, ROLLBACK, CHECK and DISCARD the coordinators applied.

Each event becomes one row of a ``facts`` Delta table, merged on a key made of the event's
identity (so a replayed batch adds nothing), and at each batch the two small summary tables
are recomputed from the facts and overwritten: ``delay_lateness`` (per level: deliveries, p50,
p99 and max lateness in ms) and ``transactions`` (per producer group: transactions, commits,
rollbacks, discards, pending, checks, checked transactions, max and mean checks per
transaction, commit latency p50/p99 from half stored to commit applied). ``--table DIR`` holds
the three tables (``DIR/facts``, ``DIR/delay_lateness``, ``DIR/transactions``).

Known gaps: the delivered time is the record timestamp the forwarder's producer gave it (just
before its Kafka transaction commits), not the commit itself; the forwarder's own histogram
(``rmq_schedule_lateness_seconds``) measures to the commit. Clocks: due times come from the
broker's clock, deliveries from the forwarder's host. The summaries are recomputed from all
facts at each batch: cheap for millions of rows on a cluster, but the facts table is never
pruned (delete old facts with Delta's ``DELETE`` / ``VACUUM`` if it grows too large). A system
record that does not decode is kept as an ``undecodable`` fact with its reason, not counted.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

from adapter import naming
from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.spark.config import SparkJobConfig
from adapter.spark.ledger import table_exists
from adapter.spark.reader import read_messages, read_system
from adapter.spark.session import build_session
from adapter.spark.streaming import batches, input_rows, run_query, start_foreach_batch

log = logging.getLogger(__name__)

QUERY_NAME = "rmq_adapter_telemetry"
FACTS, LATENESS, TRANSACTIONS = "facts", "delay_lateness", "transactions"

SCHEDULED, DELIVERED, HALF, OP, UNDECODABLE = (
    "scheduled",
    "delivered",
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


def _facts(rows: DataFrame, **columns: Column) -> DataFrame:
    """``rows`` projected onto :data:`FACT_SCHEMA` (columns not given are null)."""
    return rows.select(
        *[
            (columns[f.name] if f.name in columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in FACT_SCHEMA.fields
        ]
    )


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


def delivered_facts(messages: DataFrame) -> DataFrame:
    """Reader rows of messages the schedule forwarder delivered (they carry ``REAL_TOPIC``)."""
    forwarded = messages.where(F.col("properties").getItem(prop.REAL_TOPIC).isNotNull())
    return _facts(
        forwarded,
        fact_key=_key(DELIVERED, F.col("msg_id"), F.col("reconsume_times"), F.col("topic")),
        kind=F.lit(DELIVERED),
        msg_id=F.col("msg_id"),
        reconsume_times=F.col("reconsume_times"),
        topic=F.col("topic"),
        event_ts=F.col("store_timestamp"),
    )


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


def _ms(ts: Column) -> Column:
    return F.unix_millis(ts)


def lateness_per_level(facts: DataFrame, levels: DelayLevels) -> DataFrame:
    """``level, deliveries, p50_ms, p99_ms, max_ms``: delivered time minus due time."""
    delays = F.create_map(
        *[
            item
            for level in range(1, levels.max_level + 1)
            for item in (F.lit(level), F.lit(levels.delay_ms(level)))
        ]
    )
    # timer messages (level 0, one record per hop) are measured by the forwarder's histogram
    scheduled = facts.where((F.col("kind") == SCHEDULED) & (F.col("level") >= 1)).select(
        "msg_id", "reconsume_times", "topic", "level", F.col("event_ts").alias("stored_ts")
    )
    delivered = facts.where(F.col("kind") == DELIVERED).select(
        "msg_id", "reconsume_times", "topic", F.col("event_ts").alias("delivered_ts")
    )
    lateness = (
        _ms(F.col("delivered_ts")) - _ms(F.col("stored_ts")) - F.element_at(delays, F.col("level"))
    )
    return (
        scheduled.join(delivered, ["msg_id", "reconsume_times", "topic"])
        .withColumn("lateness_ms", lateness)
        .groupBy("level")
        .agg(
            F.count("*").alias("deliveries"),
            F.percentile("lateness_ms", 0.5).alias("p50_ms"),
            F.percentile("lateness_ms", 0.99).alias("p99_ms"),
            F.max("lateness_ms").cast("double").alias("max_ms"),
        )
        .orderBy("level")
    )


def _count_if(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("bigint")


def transaction_outcomes(facts: DataFrame) -> DataFrame:
    """Per producer group: transactions, commits, rollbacks, discards, pending, checks, checked
    transactions, max/mean checks per transaction, commit latency p50/p99 (half -> commit)."""
    op = F.col("op")
    per_transaction = (
        facts.where(F.col("kind").isin(HALF, OP))
        .groupBy("producer_group", "msg_id")
        .agg(
            F.min(F.when(F.col("kind") == HALF, F.col("event_ts"))).alias("half_ts"),
            F.min(F.when(op == "COMMIT", F.col("event_ts"))).alias("commit_ts"),
            _count_if(op == "COMMIT").alias("commits"),
            _count_if(op == "ROLLBACK").alias("rollbacks"),
            _count_if(op == "DISCARD").alias("discards"),
            _count_if(op == "CHECK").alias("checks"),
        )
        .withColumn("commit_ms", _ms(F.col("commit_ts")) - _ms(F.col("half_ts")))
    )
    ended = F.col("commits") + F.col("rollbacks") + F.col("discards") > 0
    return (
        per_transaction.groupBy("producer_group")
        .agg(
            F.count("*").alias("transactions"),
            F.sum("commits").alias("commits"),
            F.sum("rollbacks").alias("rollbacks"),
            F.sum("discards").alias("discards"),
            _count_if(~ended).alias("pending"),
            F.sum("checks").alias("checks"),
            _count_if(F.col("checks") > 0).alias("checked_transactions"),
            F.max("checks").alias("max_checks_per_transaction"),
            F.avg("checks").alias("mean_checks_per_transaction"),
            F.percentile("commit_ms", 0.5).alias("commit_p50_ms"),
            F.percentile("commit_ms", 0.99).alias("commit_p99_ms"),
        )
        .orderBy("producer_group")
    )


def _ensure_facts(spark: SparkSession, table: Path) -> None:
    (
        DeltaTable.createIfNotExists(spark)
        .location(str((table / FACTS).resolve()))
        .addColumns(FACT_SCHEMA)
        .execute()
    )


class TelemetrySink:
    """``foreachBatch``: merge the batch's facts, then rewrite the two summary tables."""

    def __init__(self, table: Path, levels: DelayLevels) -> None:
        self.table = table
        self.levels = levels

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        facts_path = str((self.table / FACTS).resolve())
        facts = _dedupe(batch)
        metrics = (
            DeltaTable.forPath(spark, facts_path)
            .alias("f")
            .merge(facts.alias("n"), "f.fact_key = n.fact_key")
            .whenNotMatchedInsertAll()
            .execute()
            .first()
        )
        inserted = int(metrics["num_inserted_rows"]) if metrics is not None else 0
        if inserted:
            write_summaries(spark, self.table, self.levels)
        log.info("telemetry batch merged", extra={"batch": batch_id, "new_facts": inserted})


def _dedupe(facts: DataFrame) -> DataFrame:
    """One row per ``fact_key`` (rows with one key describe one event: any of them will do)."""
    return facts.dropDuplicates(["fact_key"])


def write_summaries(spark: SparkSession, table: Path, levels: DelayLevels) -> None:
    """Recompute ``delay_lateness`` and ``transactions`` from the facts and overwrite them."""
    facts = spark.read.format("delta").load(str((table / FACTS).resolve()))
    for name, frame in (
        (LATENESS, lateness_per_level(facts, levels)),
        (TRANSACTIONS, transaction_outcomes(facts)),
    ):
        (
            frame.coalesce(1)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .save(str((table / name).resolve()))
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


def start_telemetry(spark: SparkSession, config: SparkJobConfig) -> StreamingQuery:
    _ensure_facts(spark, config.table)
    levels = DelayLevels.parse(config.delay_levels) if config.delay_levels else DelayLevels.parse()
    sink = TelemetrySink(config.table, levels)
    return start_foreach_batch(telemetry_facts(spark, config), QUERY_NAME, sink, config)


@dataclass(frozen=True, slots=True)
class LevelLateness:
    level: int
    deliveries: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class GroupOutcomes:
    producer_group: str
    transactions: int
    commits: int
    rollbacks: int
    discards: int
    pending: int
    checks: int
    checked_transactions: int
    max_checks_per_transaction: int
    mean_checks_per_transaction: float
    commit_p50_ms: float | None
    commit_p99_ms: float | None


@dataclass(frozen=True, slots=True)
class TelemetryResult:
    input_rows: int
    batches: int
    lateness: list[LevelLateness]
    transactions: list[GroupOutcomes]
    undecodable: int

    def group(self, producer_group: str) -> GroupOutcomes | None:
        return next((g for g in self.transactions if g.producer_group == producer_group), None)


def _rows(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    if not table_exists(path):
        return []
    return [r.asDict() for r in spark.read.format("delta").load(str(path.resolve())).collect()]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def telemetry_result(
    spark: SparkSession, config: SparkJobConfig, queries: list[StreamingQuery]
) -> TelemetryResult:
    """The summary tables as Python data (for reports and tests)."""
    table = config.table
    facts = spark.read.format("delta").load(str((table / FACTS).resolve()))
    lateness = [
        LevelLateness(
            level=int(r["level"]),
            deliveries=int(r["deliveries"]),
            p50_ms=float(r["p50_ms"]),
            p99_ms=float(r["p99_ms"]),
            max_ms=float(r["max_ms"]),
        )
        for r in sorted(_rows(spark, table / LATENESS), key=lambda r: int(r["level"]))
    ]
    groups = [
        GroupOutcomes(
            producer_group=str(r["producer_group"]),
            transactions=int(r["transactions"]),
            commits=int(r["commits"]),
            rollbacks=int(r["rollbacks"]),
            discards=int(r["discards"]),
            pending=int(r["pending"]),
            checks=int(r["checks"]),
            checked_transactions=int(r["checked_transactions"]),
            max_checks_per_transaction=int(r["max_checks_per_transaction"]),
            mean_checks_per_transaction=float(r["mean_checks_per_transaction"]),
            commit_p50_ms=_float(r["commit_p50_ms"]),
            commit_p99_ms=_float(r["commit_p99_ms"]),
        )
        for r in _rows(spark, table / TRANSACTIONS)
    ]
    return TelemetryResult(
        input_rows=input_rows(queries),
        batches=batches(queries),
        lateness=lateness,
        transactions=groups,
        undecodable=facts.where(F.col("kind") == UNDECODABLE).count(),
    )


def run_telemetry(
    config: SparkJobConfig,
    spark: SparkSession | None = None,
    *,
    stop: threading.Event | None = None,
) -> TelemetryResult:
    """Run the telemetry job (``available_now``: until Kafka's current end; else until
    ``stop``). Uses ``spark`` if given, else builds a session and stops it at the end."""
    own = spark is None
    session = spark if spark is not None else build_session(config)
    try:
        queries = run_query(lambda: start_telemetry(session, config), stop)
        result = telemetry_result(session, config, queries)
        log.info(
            "telemetry job done",
            extra={"input_rows": result.input_rows, "levels": len(result.lateness)},
        )
        return result
    finally:
        if own:
            session.stop()
