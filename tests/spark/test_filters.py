"""A SQL92 filter as a Spark column keeps exactly the rows a 5.x consumer would receive."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from adapter import sql92
from adapter.spark.filters import sql92_column

pytestmark = [pytest.mark.timeout(180)]

EXPRESSIONS = [
    "amount > 100 AND TAGS = 'A'",
    "amount = 250 OR TAGS = 'B'",
    "TAGS = 'B' OR amount = 250",  # RocketMQ's order: 'lots' = 250 throws unless settled
    "amount BETWEEN 5 AND 300 AND amount NOT BETWEEN 6 AND 9",
    "amount >= 2.5E2 OR amount < -1",
    "region IN ('eu', 'us') AND NOT (region = 'us')",
    "region NOT IN ('eu') OR region IS NULL",
    "TAGS CONTAINS 'A' AND region NOT STARTSWITH 'u' AND region ENDSWITH 'u'",
    "'x' = region OR amount > other",
    "flag = TRUE OR flag <> FALSE",
    "amount = 2147483648 OR amount > 2147483647",  # Integer.valueOf('3000000000') throws
    "amount > 2147483648 OR amount = 7.5",
    "NOT a = 'x'",
]
ROWS = [
    {"amount": "250", "TAGS": "A", "region": "eu", "other": "100"},
    {"amount": "5", "TAGS": "A", "region": "us", "flag": "true"},
    {"amount": "300", "TAGS": "B", "other": "1e9"},
    {"TAGS": "A", "region": "asia", "flag": "yes", "a": "x"},
    {"amount": "lots", "TAGS": "B", "region": "eu"},
    {"amount": " 7.5d ", "TAGS": "AB", "other": "x"},
    {"amount": "3000000000", "region": "eu"},
    {},
]


def test_a_sql92_column_agrees_with_the_consumers_filter_row_by_row(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(n, props) for n, props in enumerate([*ROWS, None])],
        "n int, properties map<string,string>",
    )
    columns = [sql92_column(e).alias(f"e{i}") for i, e in enumerate(EXPRESSIONS)]

    rows = sorted(frame.select("n", *columns).collect())

    for row in rows:
        props = ROWS[row.n] if row.n < len(ROWS) else {}
        for i, expression in enumerate(EXPRESSIONS):
            expected = sql92.parse(expression).matches(props)
            assert row[f"e{i}"] is expected, (expression, props)


def test_a_bad_expression_fails_when_the_column_is_made() -> None:
    with pytest.raises(sql92.Sql92Error, match="column 8"):
        sql92_column("amount > 'x'")
