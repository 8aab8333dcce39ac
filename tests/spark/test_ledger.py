"""The points ledger's MERGE on its own: what a batch inserted, and what the ledger held
already (a replay), counted from the batch and the inserted rows."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

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


@pytest.mark.long  # twenty seconds: two streaming batches replayed
def test_a_replayed_batch_counts_its_messages_as_already_present(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "ledger"
    ledger.ensure_ledger(spark, table)

    assert ledger.merge_into_ledger(spark, table, entries(spark, "A", "B")) == (2, 0)
    assert ledger.merge_into_ledger(spark, table, entries(spark, "A", "B", "C")) == (1, 2)
    assert ledger.merge_into_ledger(spark, table, entries(spark, "A", "C")) == (0, 2)
    assert ledger.ledger_rows(spark, table).count() == 3


def test_the_warm_up_merges_into_a_scratch_ledger_with_a_row_and_leaves_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    scratch = tmp_path / "warm-up"
    ledger.warm_up(spark, scratch)
    assert not scratch.exists()
