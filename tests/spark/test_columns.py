"""The reader's column logic on rows shaped like Spark's Kafka source, with no Kafka: a
``BORN_TIMESTAMP`` that is a number but no time falls back to the record time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.sql import SparkSession

from adapter import properties as prop
from adapter.spark.columns import rocketmq_columns

pytestmark = [pytest.mark.timeout(120)]

SOURCE = (
    "topic string, partition int, offset long, timestamp timestamp, value binary, "
    "headers array<struct<key:string,value:binary>>"
)


@pytest.mark.parametrize(
    "born", [b"9223372036854775807", b"-9223372036854775808", b"99999999999999999", b"x"]
)
def test_a_born_timestamp_out_of_any_time_range_reads_as_the_record_time(
    spark: SparkSession, born: bytes
) -> None:
    stored = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    row = ("OrderPaid", 0, 7, stored, b"body", [(prop.BORN_TIMESTAMP, born)])
    frame = spark.createDataFrame([row], SOURCE)

    [got] = rocketmq_columns(frame).collect()

    assert got["born_timestamp"] == got["store_timestamp"]


def test_a_born_timestamp_in_range_is_read_as_milliseconds(spark: SparkSession) -> None:
    stored = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    row = ("OrderPaid", 0, 7, stored, b"body", [(prop.BORN_TIMESTAMP, b"1767225600123")])

    [got] = rocketmq_columns(spark.createDataFrame([row], SOURCE)).collect()

    assert got["born_timestamp"].astimezone(UTC) == datetime(2026, 1, 1, 0, 0, 0, 123_000, UTC)
