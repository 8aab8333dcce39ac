"""Running a streaming query: its trigger, waiting for it, stopping it cleanly.

Not a RocketMQ behaviour: the wiring both jobs share. A job runs either until it has processed
what Kafka holds now (``availableNow``: one or more batches, then it stops, for batch-style
runs and tests) or continuously on a processing-time trigger until it is told to stop
(SIGTERM, Ctrl-C, or the ``stop`` event), which stops the query and lets the checkpoint speak
for the next run.

Spark 4.1.1's Kafka source fails the first batch a restarted query runs when that batch is
one the previous run had planned but not committed (a crash mid-batch): the batch runs, the
sink writes and the commit is logged, then building the progress report throws a
``NullPointerException`` in ``KafkaMicroBatchStream.metrics`` (its latest offsets are not known
yet). :func:`run_query` recognises exactly that failure and starts the query once more from
the checkpoint, which then holds the batch as committed.

Known gaps: stopping interrupts a batch in flight; it is replayed from the checkpoint by the
next run (the sinks are idempotent, so this is safe, only slower).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter

from adapter.spark.config import SparkJobConfig

log = logging.getLogger(__name__)

POLL_S = 0.2


def with_trigger(writer: DataStreamWriter, config: SparkJobConfig) -> DataStreamWriter:
    """``availableNow`` or a processing-time trigger of ``config.trigger_ms``."""
    if config.available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=f"{config.trigger_ms} milliseconds")


def start_foreach_batch(
    frame: DataFrame, name: str, sink: Callable[[DataFrame, int], None], config: SparkJobConfig
) -> StreamingQuery:
    """Start ``frame`` as the query ``name``: each micro-batch handed to ``sink`` (a MERGE),
    progress kept in ``config.checkpoint``, on ``config``'s trigger."""
    writer = (
        frame.writeStream.queryName(name)
        .foreachBatch(sink)
        .option("checkpointLocation", str(config.checkpoint.resolve()))
    )
    return with_trigger(writer, config).start()


def await_query(query: StreamingQuery, stop: threading.Event | None = None) -> None:
    """Wait until ``query`` ends by itself (availableNow) or ``stop`` is set (then stop it).

    Raises:
        pyspark.errors.StreamingQueryException: the query failed (a batch raised).
    """
    while query.isActive:
        if stop is not None and stop.is_set():
            stop_between_batches(query)
            break
        time.sleep(POLL_S)
    failure = query.exception()
    if failure is not None:
        raise failure


_SPARK_KAFKA_METRICS_NPE = ("NullPointerException", "KafkaMicroBatchStream")


def is_recovered_batch_metrics_failure(failure: BaseException) -> bool:
    """Whether ``failure`` is Spark 4.1.1's NPE in the Kafka source's progress metrics after a
    recovered batch (see the module's documentation)."""
    # PySpark keeps the JVM message and stack trace on the exception and its cause
    # (``_desc``, ``_stackTrace``, ``_cause``); str() shows neither the cause nor its frames.
    texts = []
    seen: BaseException | None = failure
    for _ in range(5):
        if seen is None:
            break
        texts += [
            type(seen).__name__,
            str(getattr(seen, "_desc", "")),
            str(getattr(seen, "_stackTrace", "")),
        ]
        origin = getattr(seen, "_origin", None)
        if origin is not None:
            texts.append(str(origin))
        seen = getattr(seen, "_cause", None) or seen.__cause__
    text = "\n".join(texts)
    return all(marker in text for marker in _SPARK_KAFKA_METRICS_NPE)


def run_query(
    start: Callable[[], StreamingQuery], stop: threading.Event | None = None
) -> list[StreamingQuery]:
    """Start a query with ``start`` and wait for it (:func:`await_query`); if it fails with
    Spark's recovered-batch metrics bug, start it once more. Returns every query started."""
    queries = [start()]
    try:
        await_query(queries[0], stop)
    except StreamingQueryException as failure:
        if not is_recovered_batch_metrics_failure(failure):
            raise
        log.warning(
            "the restarted query's recovered batch was committed, then Spark's Kafka source "
            "failed its progress metrics (a Spark 4.1.1 bug); starting the query again"
        )
        queries.append(start())
        await_query(queries[-1], stop)
    return queries


def stop_between_batches(query: StreamingQuery, timeout_s: float = 30.0) -> None:
    """Stop ``query``, preferably while no batch runs (a batch stopped midway is replayed by
    the next run: safe, but wasted work and a noisy log); after ``timeout_s`` stop anyway."""
    log.info("stopping the streaming query", extra={"query": query.name})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.isActive:
        if not query.status.get("isTriggerActive", False):
            break
        time.sleep(0.01)
    query.stop()


def input_rows(queries: Iterable[StreamingQuery]) -> int:
    """Rows the queries read, over their recent progress (the last 100 batches each)."""
    return sum(_rows(p) for q in queries for p in q.recentProgress)


def batches(queries: Iterable[StreamingQuery]) -> int:
    """Batches that read at least one row, over the recent progress."""
    return sum(1 for q in queries for p in q.recentProgress if _rows(p) > 0)


def _rows(progress: Any) -> int:
    if isinstance(progress, dict):
        return int(progress.get("numInputRows", 0))
    return int(getattr(progress, "numInputRows", 0) or 0)
