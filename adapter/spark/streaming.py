"""Running a streaming query: its trigger, waiting for it, stopping it cleanly.

Not a RocketMQ behaviour: the wiring both jobs share. A job runs either until it has processed
what Kafka holds now (``availableNow``: one or more batches, then it stops, for batch-style
runs and tests) or continuously on a processing-time trigger until it is told to stop
(SIGTERM, Ctrl-C, or the ``stop`` event), which stops the query and lets the checkpoint speak
for the next run.

Known gaps: stopping interrupts a batch in flight; it is replayed from the checkpoint by the
next run (the sinks are idempotent, so this is safe, only slower).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

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


def input_rows(query: StreamingQuery) -> int:
    """Rows the query read, over its recent progress (the last 100 batches)."""
    return sum(_rows(p) for p in query.recentProgress)


def batches(query: StreamingQuery) -> int:
    """Batches that read at least one row, over the recent progress."""
    return sum(1 for p in query.recentProgress if _rows(p) > 0)


def _rows(progress: Any) -> int:
    if isinstance(progress, dict):
        return int(progress.get("numInputRows", 0))
    return int(getattr(progress, "numInputRows", 0) or 0)
