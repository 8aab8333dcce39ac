"""Job 2, the adapter's telemetry: delay lateness per level, transaction outcomes and checks.

Reproduces the numbers a RocketMQ operator reads off the broker (the schedule service's delay
per level, the transaction check service's commits, rollbacks, checks and discards), computed
from what the adapter leaves in Kafka:

- ``SCHEDULE_TOPIC_XXXX`` (system reader): each delayed message's level and store time (the
  topic uses ``LogAppendTime``, so the broker's clock): due = store time + the level's delay;
- the real topics (message reader): the delivered copy (it carries ``REAL_TOPIC``) and when it
  was produced. A message and its delivery meet on (msg_id, reconsume_times, topic), so each
  retry of one message is its own delivery. lateness = delivered - due. A timer message
  (``TIMER_DELIVER_MS``) is due at its deliver time, and is counted per band of how far ahead
  it was set (``< 1s``, ``1-10s``, ... ``>= 1d``);
- ``RMQ_SYS_TRANS_HALF_TOPIC`` and ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (system reader): each half
  message, and each COMMIT, ROLLBACK, CHECK and DISCARD the coordinators applied.

Each event becomes one row of a ``facts`` Delta table (:mod:`.telemetry_facts`), merged on a
key made of the event's identity (so a replayed batch adds nothing; the first batch of a new
table is written, not merged), and the two small summary tables are recomputed from the facts
and overwritten: at each batch of a continuous run, once at the end of an ``availableNow``
one: ``delay_lateness`` (per level, then per timer band: deliveries, p50, p99 and max lateness
in ms) and ``transactions`` (per producer group: transactions, commits, rollbacks, discards,
pending, checks, checked transactions, max and mean checks per transaction, commit latency
p50/p99 from half stored to commit applied). ``--table DIR`` holds the three tables
(``DIR/facts``, ``DIR/delay_lateness``, ``DIR/transactions``). The result (:mod:`.results`) is
taken from the summaries just computed, not read back.

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
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from adapter.delay import DelayLevels
from adapter.spark.config import SparkJobConfig
from adapter.spark.ledger import table_exists
from adapter.spark.results import BandLateness, GroupOutcomes, LevelLateness, TelemetryResult
from adapter.spark.session import build_session, stop_session
from adapter.spark.streaming import batches, input_rows, run_query, start_foreach_batch
from adapter.spark.telemetry_facts import (
    DELIVERED,
    HALF,
    OP,
    SCHEDULED,
    TIMER,
    TIMER_BANDS,
    UNDECODABLE,
    telemetry_facts,
)

__all__ = [
    "BandLateness",
    "GroupOutcomes",
    "LevelLateness",
    "TelemetryResult",
    "run_telemetry",
    "start_telemetry",
    "telemetry_result",
]

log = logging.getLogger(__name__)

QUERY_NAME = "rmq_adapter_telemetry"
FACTS, LATENESS, TRANSACTIONS = "facts", "delay_lateness", "transactions"
LEVEL, BAND = "level", "timer"
"""The kinds of a ``delay_lateness`` row: a delay level, or a band of timer messages."""


def _ms(ts: Column) -> Column:
    return F.unix_millis(ts)


def _lateness(due: DataFrame, delivered: DataFrame, kind: str) -> DataFrame:
    """``kind, level, deliveries, p50_ms, p99_ms, max_ms`` of ``due`` rows (``due_ms`` per
    message and ``level``) met with their deliveries."""
    lateness = _ms(F.col("delivered_ts")) - F.col("due_ms")
    return (
        due.join(delivered, ["msg_id", "reconsume_times", "topic"])
        .withColumn("lateness_ms", lateness)
        .groupBy("level")
        .agg(
            F.count("*").alias("deliveries"),
            F.percentile("lateness_ms", 0.5).alias("p50_ms"),
            F.percentile("lateness_ms", 0.99).alias("p99_ms"),
            F.max("lateness_ms").cast("double").alias("max_ms"),
        )
        .select(F.lit(kind).alias("kind"), "*")
    )


def lateness_per_level(facts: DataFrame, levels: DelayLevels) -> DataFrame:
    """``kind, level, deliveries, p50_ms, p99_ms, max_ms``: delivered time minus due time, per
    delay level (kind ``level``), then per band of timer messages (kind ``timer``; ``level``
    is the band, :data:`~.telemetry_facts.TIMER_BANDS`)."""
    delays = F.create_map(
        *[
            item
            for level in range(1, levels.max_level + 1)
            for item in (F.lit(level), F.lit(levels.delay_ms(level)))
        ]
    )
    keys = ["msg_id", "reconsume_times", "topic"]
    delivered = facts.where(F.col("kind") == DELIVERED).select(
        *keys, F.col("event_ts").alias("delivered_ts")
    )
    # timer messages' hops (level 0) are not delays of a level: their deliveries are timers
    scheduled = facts.where((F.col("kind") == SCHEDULED) & (F.col("level") >= 1)).select(
        *keys,
        "level",
        (_ms(F.col("event_ts")) + F.element_at(delays, F.col("level"))).alias("due_ms"),
    )
    timers = facts.where(F.col("kind") == TIMER).select(
        *keys, "level", _ms(F.col("event_ts")).alias("due_ms")
    )
    return (
        _lateness(scheduled, delivered, LEVEL)
        .unionByName(_lateness(timers, delivered, BAND))
        .orderBy(F.col("kind").desc(), "level")
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


@dataclass(frozen=True, slots=True)
class Summaries:
    """The summary tables' rows as they were written, and the undecodable facts' count."""

    lateness: list[dict[str, Any]]
    transactions: list[dict[str, Any]]
    undecodable: int


class TelemetrySink:
    """``foreachBatch``: merge the batch's facts (write them, for a new table); rewrite the
    summary tables after each batch that added facts (``each_batch``), or leave that to the
    end of the run (:meth:`finish`). :attr:`summaries` holds the last ones written."""

    def __init__(self, table: Path, levels: DelayLevels, *, each_batch: bool = True) -> None:
        self.table = table
        self.levels = levels
        self.each_batch = each_batch
        self.summaries: Summaries | None = None
        self._stale = False

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        facts_path = str((self.table / FACTS).resolve())
        facts = _dedupe(batch)
        if table_exists(self.table / FACTS):
            metrics = (
                DeltaTable.forPath(spark, facts_path)
                .alias("f")
                .merge(facts.alias("n"), "f.fact_key = n.fact_key")
                .whenNotMatchedInsertAll()
                .execute()
                .first()
            )
            inserted = int(metrics["num_inserted_rows"]) if metrics is not None else 0
        else:  # the first batch: a write is one Delta commit, a create and a MERGE are two
            facts.write.format("delta").mode("append").save(facts_path)
            inserted = _written_rows(spark, facts_path)
        log.info("telemetry batch merged", extra={"batch": batch_id, "new_facts": inserted})
        if inserted:
            self._stale = True
            if self.each_batch:
                self.finish(spark)

    def finish(self, spark: SparkSession) -> None:
        """Rewrite the summary tables if facts were added since they were last written."""
        if self._stale:
            self.summaries = write_summaries(spark, self.table, self.levels)
            self._stale = False


def _written_rows(spark: SparkSession, path: str) -> int:
    last = DeltaTable.forPath(spark, path).history(1).select("operationMetrics").first()
    metrics = last["operationMetrics"] if last is not None else None
    return int((metrics or {}).get("numOutputRows", 0))


def _dedupe(facts: DataFrame) -> DataFrame:
    """One row per ``fact_key`` (rows with one key describe one event: any of them will do)."""
    return facts.dropDuplicates(["fact_key"])


def write_summaries(spark: SparkSession, table: Path, levels: DelayLevels) -> Summaries:
    """Recompute ``delay_lateness`` and ``transactions`` from the facts and overwrite them;
    their rows (small) are collected once and written from memory, not computed twice."""
    facts = spark.read.format("delta").load(str((table / FACTS).resolve()))
    collected: dict[str, list[Row]] = {}
    for name, frame in (
        (LATENESS, lateness_per_level(facts, levels)),
        (TRANSACTIONS, transaction_outcomes(facts)),
    ):
        collected[name] = frame.collect()
        (
            spark.createDataFrame(collected[name], frame.schema)
            .coalesce(1)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .save(str((table / name).resolve()))
        )
    undecodable = facts.where(F.col("kind") == UNDECODABLE).count()
    return Summaries(
        lateness=[r.asDict() for r in collected[LATENESS]],
        transactions=[r.asDict() for r in collected[TRANSACTIONS]],
        undecodable=undecodable,
    )


def start_telemetry(
    spark: SparkSession, config: SparkJobConfig, sink: TelemetrySink | None = None
) -> StreamingQuery:
    levels = DelayLevels.parse(config.delay_levels) if config.delay_levels else DelayLevels.parse()
    sink = sink or TelemetrySink(config.table, levels, each_batch=not config.available_now)
    return start_foreach_batch(telemetry_facts(spark, config), QUERY_NAME, sink, config)


def _rows(spark: SparkSession, path: Path) -> list[dict[str, Any]]:
    if not table_exists(path):
        return []
    return [r.asDict() for r in spark.read.format("delta").load(str(path.resolve())).collect()]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _read_summaries(spark: SparkSession, table: Path) -> Summaries:
    """The summary tables as the last run left them (a run that added no facts)."""
    facts = table / FACTS
    undecodable = 0
    if table_exists(facts):
        frame = spark.read.format("delta").load(str(facts.resolve()))
        undecodable = frame.where(F.col("kind") == UNDECODABLE).count()
    return Summaries(
        lateness=_rows(spark, table / LATENESS),
        transactions=_rows(spark, table / TRANSACTIONS),
        undecodable=undecodable,
    )


def telemetry_result(
    spark: SparkSession,
    config: SparkJobConfig,
    queries: list[StreamingQuery],
    summaries: Summaries | None = None,
) -> TelemetryResult:
    """The summaries as Python data (for reports and tests): ``summaries`` when the run just
    wrote them, else read back from the tables."""
    found = summaries or _read_summaries(spark, config.table)
    ordered = sorted(found.lateness, key=lambda r: (str(r.get("kind") or LEVEL), int(r["level"])))
    measured = [
        (str(r.get("kind") or LEVEL), int(r["level"]), int(r["deliveries"]), r) for r in ordered
    ]
    lateness = [
        LevelLateness(level, n, float(r["p50_ms"]), float(r["p99_ms"]), float(r["max_ms"]))
        for kind, level, n, r in measured
        if kind == LEVEL
    ]
    timers = [
        BandLateness(
            band, TIMER_BANDS[band], n, float(r["p50_ms"]), float(r["p99_ms"]), float(r["max_ms"])
        )
        for kind, band, n, r in measured
        if kind == BAND and 0 <= band < len(TIMER_BANDS)
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
        for r in sorted(found.transactions, key=lambda r: str(r["producer_group"]))
    ]
    return TelemetryResult(
        input_rows=input_rows(queries),
        batches=batches(queries),
        lateness=lateness,
        transactions=groups,
        undecodable=found.undecodable,
        timers=timers,
    )


def run_telemetry(
    config: SparkJobConfig,
    spark: SparkSession | None = None,
    *,
    stop: threading.Event | None = None,
) -> TelemetryResult:
    """Run the telemetry job (``available_now``: until Kafka's current end; else until
    ``stop``). Uses ``spark`` if given, else builds a session and stops it at the end (its
    JVM exited)."""
    own = spark is None
    session = spark if spark is not None else build_session(config)
    try:
        levels = (
            DelayLevels.parse(config.delay_levels) if config.delay_levels else DelayLevels.parse()
        )
        sink = TelemetrySink(config.table, levels, each_batch=not config.available_now)
        queries = run_query(lambda: start_telemetry(session, config, sink), stop)
        sink.finish(session)
        result = telemetry_result(session, config, queries, sink.summaries)
        log.info(
            "telemetry job done",
            extra={"input_rows": result.input_rows, "levels": len(result.lateness)},
        )
        return result
    finally:
        if own:
            stop_session(session)
