"""The points ledger: a Delta table with one row per message, written idempotently.

Reproduces the consumer side of RocketMQ's delivery contract made safe: RocketMQ delivers at
least once (a redelivery after a consumer crash, a retried send, a duplicate documented in
apache/rocketmq#5574), so a consumer must be idempotent on the message id. Here every
micro-batch is first deduplicated by ``msg_id`` (the earliest copy by topic, queue and offset
wins), then ``MERGE``d into the ledger on ``msg_id`` with insert-only semantics (by delta-rs,
in the driver: :func:`merge_into_ledger` says why): a message
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
two messages for the same order (an application that sends twice) both count. A batch is
collected into the driver to be merged, so the points job caps its size.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
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
    """Create the ledger table at ``path`` unless it exists (idempotent). The sink compacts it
    itself (:data:`COMPACT_EVERY`)."""
    DeltaTable.createIfNotExists(spark).location(str(path.resolve())).addColumns(
        LEDGER_SCHEMA
    ).execute()


def stamped(batch: pa.Table, batch_id: int, credited_at: datetime) -> pa.Table:
    """The ledger rows of micro-batch ``batch_id``: the :func:`first_copies` of ``batch``'s
    entries (every ledger column but ``credited_at`` and ``batch_id``; others are dropped),
    with those two added, in the ledger's column order. Done in Arrow, in the driver: in the
    streaming plan, a window and the stamps would cost each batch a shuffle and an analysis."""
    rows = first_copies(batch)
    columns = {
        "credited_at": pa.array([credited_at] * rows.num_rows, pa.timestamp("us", tz="UTC")),
        "batch_id": pa.array([batch_id] * rows.num_rows, pa.int64()),
    }
    return pa.table(
        {
            name: columns[name] if name in columns else rows.column(name)
            for name in LEDGER_SCHEMA.fieldNames()
        }
    )


def first_copies(batch: pa.Table) -> pa.Table:
    """One row per ``msg_id`` of ``batch``: the earliest copy by (topic, queue_id,
    queue_offset), as RocketMQ's consumer would have seen it first."""
    if batch.num_rows < 2:
        return batch
    ordered = batch.sort_by(
        [("topic", "ascending"), ("queue_id", "ascending"), ("queue_offset", "ascending")]
    )
    numbered = ordered.append_column("_row", pa.array(range(ordered.num_rows), pa.int64()))
    first = numbered.group_by("msg_id", use_threads=False).aggregate([("_row", "min")])
    if first.num_rows == ordered.num_rows:
        return ordered
    rows = first["_row_min"]
    return ordered.take(pc.take(rows, pc.sort_indices(rows)))


COMPACT_EVERY = 10
"""The sink folds the ledger's small files together after every this many commits: a 250 ms
trigger adds a file per batch that inserted, and each MERGE opens every file of the ledger."""
COMPACT_TARGET_BYTES = 32 * 1024 * 1024
"""Files below this size are folded together; larger ones are left alone, so a compaction
rewrites at most this much per folded file, however large the ledger grows."""


def merge_into_ledger(path: Path, entries: DataFrame, batch_id: int) -> tuple[int, int]:
    """Insert the first copy (:func:`first_copies`) of each message of micro-batch
    ``batch_id``'s ``entries`` whose ``msg_id`` is not in the ledger yet. Returns (rows
    inserted, messages of the batch already present).

    The batch is computed once, into the driver as Arrow (the points job caps a batch at
    :data:`adapter.spark.config.DEFAULT_MAX_OFFSETS_PER_TRIGGER` records), and merged by
    delta-rs: an insert-only MERGE on ``msg_id`` and one Delta commit, in tens of
    milliseconds, where Delta's Spark MERGE spends 1-1.6 s of planning, snapshots and jobs on
    a batch of a few rows (BENCHMARKS.md). Spark still reads the ledger, and Delta's log makes
    each commit atomic, so a batch replayed after a crash inserts nothing twice."""
    batch = stamped(entries.toArrow(), batch_id, datetime.now(UTC))
    if batch.num_rows == 0:
        return 0, 0
    table = deltalake.DeltaTable(str(path.resolve()))
    metrics = (
        table.merge(
            source=batch,
            predicate="ledger.msg_id = entry.msg_id",
            source_alias="entry",
            target_alias="ledger",
        )
        .when_not_matched_insert_all()
        .execute()
    )
    inserted = int(metrics.get("num_target_rows_inserted", 0))
    if inserted and table.version() % COMPACT_EVERY == 0:
        table.optimize.compact(target_size=COMPACT_TARGET_BYTES)
    return inserted, batch.num_rows - inserted


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
        merge_into_ledger(scratch, spark.createDataFrame([row], LEDGER_SCHEMA), n)
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
