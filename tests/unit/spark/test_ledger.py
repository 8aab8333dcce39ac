"""The points ledger's pure parts: one row per message in a batch (the earliest copy), the
batch's stamps, and the points job's batch cap, since each batch is merged from the driver."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from adapter.spark.config import DEFAULT_MAX_OFFSETS_PER_TRIGGER, Job, SparkJobConfig
from adapter.spark.ledger import LEDGER_SCHEMA, first_copies, stamped

pytestmark = pytest.mark.timeout(30)


def batch(*copies: tuple[str, int, int]) -> pa.Table:
    """Rows of (msg_id, queue_id, queue_offset) on one topic, with a column to tell them apart."""
    return pa.table(
        {
            "msg_id": [c[0] for c in copies],
            "topic": ["OrderPaid"] * len(copies),
            "queue_id": [c[1] for c in copies],
            "queue_offset": [c[2] for c in copies],
            "row": list(range(len(copies))),
        }
    )


def test_each_message_keeps_its_earliest_copy_by_queue_and_offset() -> None:
    kept = first_copies(batch(("A", 1, 5), ("B", 0, 9), ("A", 0, 7), ("C", 2, 1), ("B", 0, 3)))
    assert sorted((r["msg_id"], r["queue_id"], r["queue_offset"]) for r in kept.to_pylist()) == [
        ("A", 0, 7),
        ("B", 0, 3),
        ("C", 2, 1),
    ]


def test_a_batch_without_copies_keeps_every_row() -> None:
    assert first_copies(batch(("A", 0, 1), ("B", 0, 2))).num_rows == 2
    assert first_copies(batch()).num_rows == 0


def test_copies_of_one_message_on_one_offset_keep_one_row() -> None:
    assert first_copies(batch(("A", 0, 1), ("A", 0, 1), ("A", 0, 1))).num_rows == 1


def test_the_points_job_reads_a_backlog_in_capped_batches_unless_told() -> None:
    default = SparkJobConfig.from_env(Job.POINTS, environ={}, bootstrap="127.0.0.1:9092")
    assert default.max_offsets_per_trigger == DEFAULT_MAX_OFFSETS_PER_TRIGGER[Job.POINTS]
    told = SparkJobConfig.from_env(
        Job.POINTS,
        environ={"RMQ_ADAPTER_SPARK_MAX_OFFSETS_PER_TRIGGER": "500"},
        bootstrap="127.0.0.1:9092",
    )
    assert told.max_offsets_per_trigger == 500
    telemetry = SparkJobConfig.from_env(Job.TELEMETRY, environ={}, bootstrap="127.0.0.1:9092")
    assert telemetry.max_offsets_per_trigger is None


def test_a_batch_is_stamped_with_its_id_and_time_in_the_ledgers_column_order() -> None:
    entry_names = [n for n in LEDGER_SCHEMA.fieldNames() if n not in ("credited_at", "batch_id")]
    copies = batch(("A", 0, 2), ("A", 0, 1), ("B", 1, 0))
    columns = {name: copies.column(name) for name in copies.column_names if name in entry_names}
    entries = pa.table(
        {
            **{name: columns.get(name, pa.nulls(3)) for name in entry_names},
            "left_over": [1, 2, 3],
        }
    )
    now = datetime(2026, 11, 27, 19, 45, tzinfo=UTC)

    rows = stamped(entries, 7, now)

    assert rows.column_names == LEDGER_SCHEMA.fieldNames()
    assert sorted((r["msg_id"], r["queue_offset"]) for r in rows.to_pylist()) == [
        ("A", 1),
        ("B", 0),
    ]
    assert {(r["batch_id"], r["credited_at"]) for r in rows.to_pylist()} == {(7, now)}
