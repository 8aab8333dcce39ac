"""The points ledger's MERGE on its own (delta-rs, from the driver): what a batch inserted,
what the ledger held already (a replay), one row for copies of a message, and a ledger that
Spark reads after many small batches and their compactions."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import deltalake
import pytest
from pyspark.sql import DataFrame, SparkSession

from adapter.spark import ledger

pytestmark = [pytest.mark.timeout(180)]


def entries(spark: SparkSession, *msg_ids: str) -> DataFrame:
    now = datetime.now(UTC)
    rows = [
        (msg_id, ledger.CREDITED, None, f"order-{msg_id}", "user-1", Decimal("12.50"), "EUR", 12,
         now, "OrderPaid", 0, offset, msg_id, now, now, 1)
        for offset, msg_id in enumerate(msg_ids)
    ]  # fmt: skip
    return spark.createDataFrame(rows, ledger.LEDGER_SCHEMA)


def test_a_replayed_batch_counts_its_messages_as_already_present(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "ledger"
    ledger.ensure_ledger(spark, table)

    assert ledger.merge_into_ledger(table, entries(spark, "A", "B"), 1) == (2, 0)
    assert ledger.merge_into_ledger(table, entries(spark, "A", "B", "C"), 1) == (1, 2)
    assert ledger.merge_into_ledger(table, entries(spark, "A", "C"), 1) == (0, 2)
    assert ledger.ledger_rows(spark, table).count() == 3


def test_copies_of_a_message_in_one_batch_credit_once_from_the_earliest(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "ledger"
    ledger.ensure_ledger(spark, table)

    assert ledger.merge_into_ledger(table, entries(spark, "A", "A", "B"), 1) == (2, 0)
    rows = {r["msg_id"]: r["queue_offset"] for r in ledger.ledger_rows(spark, table).collect()}
    assert rows == {"A": 0, "B": 2}


def test_many_small_batches_and_their_compactions_leave_every_row_readable_by_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "ledger"
    ledger.ensure_ledger(spark, table)
    batches = 2 * ledger.COMPACT_EVERY + 1
    for n in range(batches):
        assert ledger.merge_into_ledger(table, entries(spark, f"M{n}"), 1) == (1, 0)

    assert ledger.ledger_rows(spark, table).count() == batches
    assert {r["points"] for r in ledger.balances(spark, table).collect()} == {12 * batches}
    history = [h.get("operation") for h in deltalake.DeltaTable(str(table)).history()]
    assert history.count("OPTIMIZE") == 2


def test_the_warm_up_merges_into_a_scratch_ledger_with_a_row_and_leaves_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    scratch = tmp_path / "warm-up"
    ledger.warm_up(spark, scratch)
    assert not scratch.exists()
