"""Job 1, the points ledger: members earn 1 point per currency unit of each committed payment.

Reproduces the seeds' business case end to end on Kafka: the order service takes a payment in
a local database transaction and sends ``OrderPaid`` as a transactional message in the same
transaction (``TransactionMQProducer``); only committed payments reach the topic, and this job,
reading it with ``read_committed``, credits each of them exactly once: a rolled-back payment is
never seen, a redelivered or duplicated message (same ``msg_id``) never credits twice, and a job
stopped or killed and restarted from its checkpoint neither loses nor double-counts
(:mod:`adapter.spark.ledger`).

The column logic is :func:`ledger_entries` (pure: reader columns -> ledger rows); the sink is
:class:`PointsSink` (``foreachBatch``: dedupe by ``msg_id``, then ``MERGE``); the wiring is
:func:`start_points` / :func:`run_points`.

Known gaps: a body that is not an ``OrderPaid`` gets a ``rejected`` row and no points (it is
not retried: a new schema version needs a new job version). Points are never taken back: a
refund would be its own event.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from adapter.spark import ledger, orders
from adapter.spark.config import SparkJobConfig
from adapter.spark.reader import read_messages
from adapter.spark.session import session_for
from adapter.spark.streaming import batches, input_rows, run_query, start_foreach_batch

log = logging.getLogger(__name__)

QUERY_NAME = "rmq_points_ledger"


def ledger_entries(messages: DataFrame) -> DataFrame:
    """Reader rows (:mod:`adapter.spark.columns`) as ledger rows, without ``credited_at`` and
    ``batch_id``: an ``OrderPaid`` body is credited ``floor(amount)`` points, anything else is
    rejected with the reason."""
    order, error = orders.decode_column(F.col("body"))
    decoded = messages.select("*", order, error)
    amount = F.col("order.amount")
    reason = (
        F.when(F.col("error").isNotNull(), F.concat(F.lit("not an OrderPaid: "), F.col("error")))
        .when(amount.isNull(), F.lit("OrderPaid without an amount"))
        .when(amount < 0, F.lit("negative amount"))
    )
    credited = reason.isNull()
    return decoded.select(
        F.col("msg_id"),
        F.when(credited, F.lit(ledger.CREDITED)).otherwise(F.lit(ledger.REJECTED)).alias("status"),
        reason.alias("reason"),
        F.col("order.order_id").alias("order_id"),
        F.col("order.user_id").alias("user_id"),
        amount.cast("decimal(12,2)").alias("amount"),
        F.col("order.currency").alias("currency"),
        F.when(credited, orders.points_for(amount))
        .otherwise(F.lit(0))
        .cast("bigint")
        .alias("points"),
        F.col("order.paid_at").alias("paid_at"),
        F.col("topic"),
        F.col("queue_id"),
        F.col("queue_offset"),
        F.col("transaction_id"),
        F.col("store_timestamp").alias("committed_at"),
    )


class PointsSink:
    """The ``foreachBatch`` function: a batch of :func:`ledger_entries` into the ledger
    (:func:`adapter.spark.ledger.merge_into_ledger`: one row per ``msg_id``, insert only).

    The entries are computed in the streaming plan, before the sink: Spark analyses that plan
    once, when the query starts, instead of once per transformation in every batch."""

    def __init__(self, table: Path, on_batch: ledger.BatchHook | None = None) -> None:
        self.table = table
        self.on_batch = on_batch

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        inserted, present = ledger.merge_into_ledger(self.table, batch, batch_id)
        outcome = ledger.BatchOutcome(
            batch_id=batch_id,
            inserted=inserted,
            already_present=present,
            merged_at=datetime.now(UTC),
        )
        log.info(
            "points batch merged",
            extra={"batch": batch_id, "inserted": inserted, "already_present": present},
        )
        if self.on_batch is not None:
            self.on_batch(outcome)


def start_points(
    spark: SparkSession, config: SparkJobConfig, on_batch: ledger.BatchHook | None = None
) -> StreamingQuery:
    """Start the points query (the ledger table is created first if needed)."""
    ledger.ensure_ledger(spark, config.table)
    sink = PointsSink(config.table, on_batch)
    entries = ledger_entries(read_messages(spark, config))
    return start_foreach_batch(entries, QUERY_NAME, sink, config)


@dataclass(frozen=True, slots=True)
class PointsResult:
    input_rows: int
    """Messages read by this run (duplicates included)."""
    batches: int
    credited: int
    """Credited rows in the ledger after the run (all runs)."""
    rejected: int
    balances: dict[str, int]
    """Points per member after the run."""


def points_result(
    spark: SparkSession, config: SparkJobConfig, queries: list[StreamingQuery]
) -> PointsResult:
    rows = ledger.ledger_rows(spark, config.table)
    by_status = rows.groupBy("status").agg(F.count("*").alias("n")).collect()
    counts = {r["status"]: int(r["n"]) for r in by_status}
    return PointsResult(
        input_rows=input_rows(queries),
        batches=batches(queries),
        credited=counts.get(ledger.CREDITED, 0),
        rejected=counts.get(ledger.REJECTED, 0),
        balances={
            r["user_id"]: int(r["points"]) for r in ledger.balances(spark, config.table).collect()
        },
    )


def run_points(
    config: SparkJobConfig,
    spark: SparkSession | None = None,
    *,
    stop: threading.Event | None = None,
    on_batch: ledger.BatchHook | None = None,
) -> PointsResult:
    """Run the points job: with ``available_now`` until Kafka's current end, else until
    ``stop`` is set. Uses ``spark`` if given (it stays open), else builds a session and stops
    it at the end."""
    with session_for(config, spark) as session:
        queries = run_query(lambda: start_points(session, config, on_batch), stop)
        result = points_result(session, config, queries)
    log.info(
        "points job done", extra={"input_rows": result.input_rows, "credited": result.credited}
    )
    return result
