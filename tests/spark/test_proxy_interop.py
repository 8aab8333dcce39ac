"""The Spark reader's leg of the proxy's interoperation: what the official Java client commits
through ``rmq-adapter proxy`` is read once, with its RocketMQ columns, and what it rolls back is
never read (the PushConsumer and SimpleConsumer legs are in
``tests/integration/proxy/test_java_client.py``, whose proxy, Java build and scenario this
module reuses)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from adapter import naming
from adapter import properties as prop
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.reader import read_messages
from tests.integration.proxy.conftest import RunningProxy
from tests.integration.proxy.conftest import proxy as proxy  # the fixture
from tests.integration.proxy.reads import records_with_ids
from tests.integration.proxy.test_java_client import RunJava, java_transactions
from tests.integration.proxy.test_java_client import classpath as classpath  # the fixture
from tests.integration.proxy.test_java_client import run_java as run_java  # the fixture
from tests.spark.test_reader import collect_stream

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def test_a_java_transaction_is_read_once_by_spark_with_its_columns_and_a_rollback_never(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    proxy: RunningProxy,
    run_java: RunJava,
    new_topic: Callable[..., str],
    start_coordinator: Any,
    system_topics: str,
    tmp_path: Path,
) -> None:
    topic = new_topic(partitions=2, prefix="JSpark")
    decided = java_transactions(proxy, run_java, topic, start_coordinator)
    committed = {i for i, kind in decided.items() if kind in ("COMMIT", "UNKNOWN")}
    records_with_ids(system_topics, naming.kafka_topic(topic), committed, timeout=60)

    config = job_config(Job.POINTS, topic, name="interop")
    rows = collect_stream(spark, read_messages(spark, config), tmp_path / "interop" / "memory")

    assert sorted(r["msg_id"] for r in rows) == sorted(committed), "each once, no rollback"
    for row in rows:
        kind = decided[row["msg_id"]]
        assert (row["topic"], row["tags"], row["keys"], row["body"]) == (
            topic,
            "TagJ",
            kind,
            kind.encode(),
        )
        assert row["properties"]["from"] == "java"
        assert row["properties"][prop.UNIQ_KEY] == row["msg_id"]
        assert row["properties"][prop.PRODUCER_GROUP] == topic
        assert prop.TRANSACTION_PREPARED not in row["properties"]
        assert row["transaction_id"], "a transactional message keeps its transaction id"
