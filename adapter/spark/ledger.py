"""The points ledger: a Delta table with one row per message, written idempotently.

Reproduces the consumer side of RocketMQ's delivery contract made safe: RocketMQ delivers at
least once (a redelivery after a consumer crash, a retried send, a duplicate documented in
apache/rocketmq#5574), so a consumer must be idempotent on the message id. Here every
micro-batch is first deduplicated by ``msg_id`` (the earliest copy by topic, queue and offset
wins), then ``MERGE``d into the ledger on ``msg_id`` with insert-only semantics: a message
already in the ledger changes nothing. A batch replayed after a crash (the Delta commit was
written but the streaming checkpoint was not) therefore credits nothing twice, and a batch
that never committed is replayed from the checkpoint, so nothing is lost.

Every message of the topic gets a row: ``status`` is ``credited`` (with its points) or
``rejected`` (a body that is not an ``OrderPaid``, with ``reason``, 0 points), so nothing is
dropped silently. A member's balance is the sum of its credited points (:func:`balances`): the
ledger is the single source of truth, so there is no second table to keep in step.

Exactly once holds for messages with a ``UNIQ_KEY`` (every message the adapter's producers,
coordinator and forwarder write has one). A record without one (a plain Kafka producer's) gets
``<kafka topic>-<partition>@<offset>`` as its id, so a copy written twice (a non-idempotent
producer's retry, or an application that sends again) is two messages and credits twice; a
redelivery of the same record, or a replayed batch, still credits once.

Known gaps: the MERGE reads the whole ledger at each batch (message ids are random, so Delta's
file statistics cannot prune): past a few million rows, partition the ledger (e.g. by day) and
add the partition to the merge condition. Deduplication is by message id only, as in RocketMQ;
two messages for the same order (an application that sends twice) both count. Each batch is
checkpointed locally before the MERGE, to count it without reading Kafka twice.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

CREDITED = "credited"
REJECTED = "rejected"

LEDGER_SCHEMA = StructType(
    [
        StructField("msg_id", StringType(), False),
        StructField("status", StringType(), False),
        StructField("reason", StringType(), True),
        StructField("order_id", StringType(), True),
        StructField("user_id", StringType(), True),
        StructField("amount", DecimalType(12, 2), True),
        StructField("currency", StringType(), True),
        StructField("points", LongType(), False),
        StructField("paid_at", TimestampType(), True),
        StructField("topic", StringType(), False),
        StructField("queue_id", IntegerType(), False),
        StructField("queue_offset", LongType(), False),
        StructField("transaction_id", StringType(), True),
        StructField("committed_at", TimestampType(), True),
        StructField("credited_at", TimestampType(), False),
        StructField("batch_id", LongType(), False),
    ]
)
"""``committed_at`` is the message's store time on its topic (for a transactional message, when
the commit was applied); ``credited_at`` is when its batch was merged."""


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one micro-batch did to the ledger."""

    batch_id: int
    inserted: int
    """Ledger rows the batch added (credited or rejected)."""
    already_present: int
    """Messages of the batch the ledger already held (a replay or a redelivery)."""
    merged_at: datetime
    """When the MERGE returned (the rows are visible to readers from then on)."""


BatchHook = Callable[[BatchOutcome], None]


def ensure_ledger(spark: SparkSession, path: Path) -> None:
    """Create the ledger table at ``path`` unless it exists (idempotent).

    Auto-compaction is on: a 500 ms trigger adds a small file or two per batch, and the MERGE
    reads every file of the ledger, so without compaction each batch gets slower; Delta folds
    them together after a commit once enough have gathered (10 in this product's sessions,
    :mod:`adapter.spark.session`)."""
    (
        DeltaTable.createIfNotExists(spark)
        .location(str(path.resolve()))
        .addColumns(LEDGER_SCHEMA)
        .property("delta.autoOptimize.autoCompact", "true")
        .execute()
    )


def batch_rows(entries: DataFrame, batch_id: int) -> DataFrame:
    """The ledger rows of micro-batch ``batch_id`` of ``entries`` (every column of the ledger
    but ``credited_at`` and ``batch_id``, which this adds): one row per ``msg_id``, the earliest
    copy by (topic, queue_id, queue_offset). Few plan steps, as each costs an analysis of the
    whole plan."""
    order = Window.partitionBy("msg_id").orderBy("topic", "queue_id", "queue_offset")
    numbered = entries.select("*", F.row_number().over(order).alias("_n"))
    stamped = {"credited_at": F.current_timestamp(), "batch_id": F.lit(batch_id).cast("bigint")}
    return numbered.where(F.col("_n") == 1).select(
        *[stamped.get(name, F.col(name)).alias(name) for name in LEDGER_SCHEMA.fieldNames()]
    )


ONE_FILE_ROWS = 100_000
"""A batch of at most this many rows goes into the ledger as one file (a 500 ms trigger's
batches hold a few to a few thousand); a larger one, a backlog caught up, is written in
parallel."""


def merge_into_ledger(spark: SparkSession, path: Path, entries: DataFrame) -> tuple[int, int]:
    """Insert the ``entries`` whose ``msg_id`` is not in the ledger yet; ``entries`` must hold
    one row per ``msg_id``. Returns (rows inserted, rows of the batch already present).

    An insert-only MERGE reports only the rows it inserted (and commits nothing when there
    are none), so the rows already present are the batch's rows less those. The batch is
    checkpointed locally first (read from its source once: counting it again would read the
    Kafka records twice, and the query would report them twice), then counted and merged. A
    batch of up to :data:`ONE_FILE_ROWS` rows is written as one file, not one per shuffle
    partition: the ledger then gathers the files that auto-compaction folds together half as
    fast, and each MERGE opens fewer."""
    ledger = DeltaTable.forPath(spark, str(path.resolve()))
    frozen = entries.localCheckpoint(eager=True)
    size = frozen.count()
    if size <= ONE_FILE_ROWS:
        frozen = frozen.coalesce(1)
    metrics = (
        ledger.alias("ledger")
        .merge(frozen.alias("entry"), "ledger.msg_id = entry.msg_id")
        .whenNotMatchedInsertAll()
        .execute()
        .first()
    )
    inserted = int(metrics["num_inserted_rows"]) if metrics is not None else 0
    return inserted, size - inserted


def warm_up(spark: SparkSession, scratch: Path) -> None:
    """Run the sink's insert-only MERGE into a scratch ledger at ``scratch`` that holds a row,
    then delete it: the first MERGE of a JVM into a ledger with rows runs its code paths for
    the first time and takes seconds. A job that starts with this pays that before its first
    message instead of at it (the demo does, while its broker starts)."""
    ensure_ledger(spark, scratch)
    now = datetime.now(UTC)
    for n in range(2):  # into the empty ledger, then into one that holds a row
        row = (f"warm-up-{n}", CREDITED, None, None, None, None, None, 0, None, "warm-up", 0, n,
               None, now, now, n)  # fmt: skip
        merge_into_ledger(spark, scratch, spark.createDataFrame([row], LEDGER_SCHEMA))
    shutil.rmtree(scratch, ignore_errors=True)


def table_exists(path: Path) -> bool:
    """Whether a Delta table with at least one commit is at the local ``path``.

    Read from the files: ``DeltaTable.isDeltaTable`` caches a path it once found without a
    table (e.g. while another process was creating it) and keeps answering False."""
    return any((path / "_delta_log").glob("*.json"))


def ledger_rows(spark: SparkSession, path: Path) -> DataFrame:
    return spark.read.format("delta").load(str(path.resolve()))


def balances(spark: SparkSession, path: Path) -> DataFrame:
    """Points per member: the sum of their credited ledger rows."""
    return (
        ledger_rows(spark, path)
        .where(F.col("status") == CREDITED)
        .groupBy("user_id")
        .agg(F.sum("points").alias("points"), F.count("*").alias("payments"))
    )
