"""Job 3, the message index: a Delta table of every message's id, keys, tag and Kafka place.

Plays the part of RocketMQ's index file (``IndexService``: a message found by its ``UNIQ_KEY``
or one of its ``KEYS`` without reading the commit log) for volumes where scanning a window of a
topic is too slow. The job reads the real topics (every one but Kafka's and the adapter's
system topics, so ``%RETRY%`` and ``%DLQ%`` too, or those given with ``--topic``) through
Spark's Kafka source, committed records only, and appends one row per record to a Delta table
partitioned by topic: :data:`INDEX_COLUMNS`. ``keys`` is the ``KEYS`` property split on spaces
(an array, empty when absent), as RocketMQ indexes each key of a message.

The sink is Delta's own streaming sink (append): each micro-batch is committed to the table
with the query's id and batch number, and a batch replayed after a restart from the checkpoint
is recognised and skipped, so a row is never written twice for the same (topic, partition,
offset). ``rmq-adapter message query|show --index PATH`` read the table without Spark
(:mod:`adapter.ops.message_index`).

Known gaps: a record deleted by Kafka's retention stays in the index (the command then says the
record is gone); a new checkpoint over an existing table appends the records again (the readers
drop duplicate places). No compaction: run ``OPTIMIZE`` from time to time on a busy table.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from adapter.spark.config import SparkJobConfig
from adapter.spark.reader import read_messages
from adapter.spark.session import session_for
from adapter.spark.streaming import batches, input_rows, run_query, with_trigger

log = logging.getLogger(__name__)

QUERY_NAME = "rmq_message_index"

INDEX_COLUMNS = (
    "msg_id",
    "keys",
    "tags",
    "topic",
    "partition",
    "offset",
    "born_time",
    "stored_time",
)
"""``topic`` is the RocketMQ name (decoded), ``partition`` and ``offset`` the record's place on
Kafka, ``born_time`` the producer's time, ``stored_time`` the record timestamp (what a query's
window is compared with)."""


def index_rows(messages: DataFrame) -> DataFrame:
    """Reader rows (:mod:`adapter.spark.columns`) as index rows (:data:`INDEX_COLUMNS`)."""
    keys = F.filter(F.split(F.coalesce(F.col("keys"), F.lit("")), " "), lambda k: k != "")
    return messages.select(
        F.col("msg_id"),
        keys.alias("keys"),
        F.col("tags"),
        F.col("topic"),
        F.col("queue_id").alias("partition"),
        F.col("queue_offset").alias("offset"),
        F.col("born_timestamp").alias("born_time"),
        F.col("store_timestamp").alias("stored_time"),
    )


def start_index(spark: SparkSession, config: SparkJobConfig) -> StreamingQuery:
    """Start the index query: append to the Delta table at ``config.table``."""
    rows = index_rows(read_messages(spark, config))
    writer = (
        rows.writeStream.queryName(QUERY_NAME)
        .format("delta")
        .outputMode("append")
        .partitionBy("topic")
        .option("checkpointLocation", str(config.checkpoint.resolve()))
    )
    return with_trigger(writer, config).start(str(config.table.resolve()))


@dataclass(frozen=True, slots=True)
class IndexResult:
    input_rows: int
    """Records this run indexed."""
    batches: int
    rows: int
    """Rows in the index after the run (all runs)."""
    topics: int
    """Topics with rows in the index."""


def index_result(
    spark: SparkSession, config: SparkJobConfig, queries: list[StreamingQuery]
) -> IndexResult:
    table = spark.read.format("delta").load(str(config.table.resolve()))
    summary = table.agg(F.count("*").alias("n"), F.countDistinct("topic").alias("t")).first()
    return IndexResult(
        input_rows=input_rows(queries),
        batches=batches(queries),
        rows=int(summary["n"]) if summary is not None else 0,
        topics=int(summary["t"]) if summary is not None else 0,
    )


def format_index(result: IndexResult) -> str:
    plural = "" if result.batches == 1 else "es"
    return (
        f"message index (Delta, append per batch)\n"
        f"  {result.rows:,} records of {result.topics} topics indexed; this run read "
        f"{result.input_rows:,} records in {result.batches} batch{plural}"
    )


def run_index(
    config: SparkJobConfig,
    spark: SparkSession | None = None,
    *,
    stop: threading.Event | None = None,
) -> IndexResult:
    """Run the index job: with ``available_now`` until Kafka's current end, else until
    ``stop`` is set. Uses ``spark`` if given (it stays open), else builds a session and stops
    it at the end."""
    with session_for(config, spark) as session:
        queries = run_query(lambda: start_index(session, config), stop)
        result = index_result(session, config, queries)
    log.info("index job done", extra={"input_rows": result.input_rows, "rows": result.rows})
    return result
