"""Spark downstream: commit-to-ledger latency, the reader's rate against the bare Kafka source,
and the driver's peak memory.

- commit-to-ledger: the points job (``adapter.spark.points``) runs with a 500 ms
  processing-time trigger on a local[2] session in this process; one ``TransactionMQProducer``
  sends ``OrderPaid`` payments paced at R/s (default 10/s, L = 300 payments), a transaction
  coordinator runs as its own process (``rmq-adapter worker transactions``). Latency = the
  moment the ledger MERGE of the payment's batch returned (the ``foreachBatch`` hook) - the
  moment ``local_execute`` returned COMMIT (same clock). Split into commit-to-topic (the ledger
  row's ``committed_at``, the record's timestamp, minus the commit) and topic-to-ledger.
  A paced warm-up of W payments runs first (default 1,200: two minutes at 10/s), as a
  streaming job runs for hours: on two cores the driver's JIT takes about two minutes to
  reach its steady state, and a batch is ~2x slower before. The warm-up's own latency is
  printed too (a cold JVM).
- reader rate: N normal messages (default 100,000: ``TAGS``, ``KEYS``, ``UNIQ_KEY`` and one user
  property as headers, 100-byte bodies) on a 2-partition topic, read with ``availableNow`` into
  Spark's ``noop`` sink by (a) the bare ``spark.readStream.format("kafka")`` source without
  options, (b) the same source with the reader's options (``read_committed``,
  ``includeHeaders``), (c) the reader (``adapter.spark.reader.read_messages``: every RocketMQ
  column). Rate = rows / the batch time Spark reports (triggerExecution); each measured 3
  times in turns after one warm-up of each, best kept. Ratio = (c) / (a), and (c) / (b).
- memory: the driver JVM's peak RSS (VmHWM) at the end, and this Python process's.

Run: ``python -m bench.spark [--payments L] [--warmup W] [--rate R] [--messages N] [--quick]``
(``--quick`` divides the counts by 5). ``KAFKA_BOOTSTRAP`` uses an existing broker, else a
local broker process is started and stopped. Logs in ``bench/.out/spark/``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from adapter import naming
from adapter.client import Message, Producer, TransactionMQProducer, TransactionStatus
from adapter.delay import DelayLevels
from adapter.kafka import topics
from adapter.spark import ledger, orders
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.points import start_points
from adapter.spark.reader import kafka_source, read_messages
from adapter.spark.session import build_session, driver_jvm_pid
from bench.common import Coordinator, Table, kafka, new_topic

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / ".out" / "spark"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def verdict(ok: bool) -> str:
    return "yes" if ok else "**no**"


def payment(topic: str, i: int, tag: str) -> Message:
    message = Message(topic)
    message.set_keys(f"{tag}-{i}")
    message.set_body(
        orders.encode(
            orders.OrderPaid(
                order_id=f"{tag}-{i}",
                user_id=f"member-{i % 50}",
                amount=Decimal("19.90"),
                currency="EUR",
                paid_at=int(time.time() * 1000),
            )
        )
    )
    return message


def commit_to_ledger(
    spark: SparkSession, bootstrap: str, work: Path, payments: int, warmup: int, per_second: float
) -> dict[str, Any]:
    topic = new_topic(bootstrap, 2, "OrderPaid")
    config = SparkJobConfig.from_env(
        Job.POINTS,
        environ={},
        bootstrap=bootstrap,
        topics=(topic,),
        checkpoint=work / "points" / "checkpoint",
        table=work / "points" / "table",
        trigger_ms=500,
    )
    merged: dict[int, float] = {}
    lock = threading.Lock()

    def on_batch(outcome: ledger.BatchOutcome) -> None:
        with lock:
            merged[outcome.batch_id] = time.time()

    committed_at: dict[str, float] = {}
    producer = TransactionMQProducer("GID_bench_spark", lambda _m: TransactionStatus.COMMIT)
    producer.set_name_server_address(bootstrap)
    producer.start()

    def send(i: int, tag: str) -> None:
        moment: list[float] = []

        def local(_m: Any, _a: Any) -> TransactionStatus:  # the local transaction commits
            moment.append(time.time())
            return TransactionStatus.COMMIT

        result = producer.send_message_in_transaction(payment(topic, i, tag), local, None)
        committed_at[result.msg_id] = moment[0]

    def ledger_count() -> int:
        return (
            ledger.ledger_rows(spark, config.table).count()
            if ledger.table_exists(config.table)
            else 0
        )

    def paced(count: int, tag: str) -> set[str]:
        before = set(committed_at)
        started = time.monotonic()
        for i in range(count):
            send(i, tag)
            pause = started + (i + 1) / per_second - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        return set(committed_at) - before

    query = start_points(spark, config, on_batch)
    try:
        cold = paced(warmup, "warmup")
        warm = paced(payments, "paced")
        deadline = time.monotonic() + 120
        while ledger_count() < warmup + payments and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        query.stop()
        producer.shutdown()
    progress = [p for p in query.recentProgress if p.numInputRows > 0]
    rows = (
        ledger.ledger_rows(spark, config.table)
        .select("msg_id", "batch_id", F.unix_millis("committed_at").alias("stored_ms"))
        .collect()
    )
    total, to_topic, to_ledger, cold_total = [], [], [], []
    for row in rows:
        if row["msg_id"] not in committed_at:
            continue
        commit = committed_at[row["msg_id"]]
        done = merged[row["batch_id"]]
        if row["msg_id"] in cold:
            cold_total.append((done - commit) * 1000)
        if row["msg_id"] not in warm:
            continue
        total.append((done - commit) * 1000)
        to_topic.append(row["stored_ms"] - commit * 1000)
        to_ledger.append(done * 1000 - row["stored_ms"])
    return {
        "credited": len(total),
        "sent": payments,
        "cold": cold_total,
        "total": total,
        "to_topic": to_topic,
        "to_ledger": to_ledger,
        "batch_ms": statistics.median(p.durationMs["triggerExecution"] for p in progress[-50:]),
        "rows_per_batch": statistics.median(p.numInputRows for p in progress[-50:]),
    }


def produce_messages(bootstrap: str, count: int) -> str:
    topic = new_topic(bootstrap, 2, "ReaderBench")
    producer = Producer("GID_bench_reader")
    producer.set_name_server_address(bootstrap)
    producer.start()
    body = b"x" * 100
    for i in range(count):
        message = Message(topic)
        message.set_tags("TagA")
        message.set_keys(f"order-{i}")
        message.set_property("amount", str(i))
        message.set_body(body)
        producer.send_oneway(message)
    producer.shutdown()
    return topic


def timed_run(frame: DataFrame, checkpoint: Path) -> tuple[int, float]:
    """(rows, seconds of batch time) of an availableNow run of ``frame`` into ``noop``."""
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = query.recentProgress
    rows = sum(p.numInputRows for p in progress)
    seconds = sum(p.durationMs["triggerExecution"] for p in progress) / 1000
    return rows, seconds


def reader_rate(spark: SparkSession, bootstrap: str, work: Path, messages: int) -> dict[str, Any]:
    topic = produce_messages(bootstrap, messages)
    config = SparkJobConfig.from_env(
        Job.POINTS, environ={}, bootstrap=bootstrap, topics=(topic,), checkpoint=work, table=work
    )

    def bare() -> DataFrame:
        return (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", naming.kafka_topic(topic))
            .option("startingOffsets", "earliest")
            .load()
        )

    variants = {
        "bare Kafka source": bare,
        "Kafka source, reader's options": lambda: kafka_source(spark, config, topics=[topic]),
        "reader (RocketMQ columns)": lambda: read_messages(spark, config),
    }
    best: dict[str, float] = {}
    rows_seen: dict[str, int] = {}
    for round_ in range(4):  # round 0 warms up
        for name, build in variants.items():
            rows, seconds = timed_run(build(), work / f"rate-{uuid.uuid4().hex[:6]}")
            rows_seen[name] = rows
            if round_ > 0:
                best[name] = max(best.get(name, 0.0), rows / seconds)
    return {"rates": best, "rows": rows_seen}


def peak_rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--payments", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=1200)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.payments //= 5
        args.warmup //= 5
        args.messages //= 5
    work = Path(tempfile.mkdtemp(prefix="rmq-bench-spark-"))
    with kafka() as bootstrap:
        topics.init_topics(
            {"bootstrap.servers": bootstrap}, topics.system_layout(8, DelayLevels.parse())
        )
        coordinator = Coordinator(bootstrap, OUT, "spark")
        try:
            coordinator.wait_ready()
            spark = build_session(
                SparkJobConfig(Job.POINTS, bootstrap, work, work, topics=("unused",))
            )
            latency = commit_to_ledger(
                spark, bootstrap, work, args.payments, args.warmup, args.rate
            )
            rates = reader_rate(spark, bootstrap, work, args.messages)
            jvm_peak = peak_rss_mb(driver_jvm_pid(spark))
            python_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            spark.stop()
        finally:
            coordinator.stop()
    shutil.rmtree(work, ignore_errors=True)

    table = Table("Spark downstream (bench/spark.py)")
    total, to_topic, to_ledger = latency["total"], latency["to_topic"], latency["to_ledger"]
    p50 = percentile(total, 0.5)
    table.add(
        f"commit-to-ledger, 500 ms trigger, {args.rate:g}/s paced",
        f"{latency['credited']}/{latency['sent']} credited",
        f"{p50:,.0f}",
        f"{percentile(total, 0.99):,.0f}",
        f"{max(total):,.0f}",
        "p50 <= 2,000 ms",
        verdict(p50 <= 2000),
    )
    cold = latency["cold"]
    table.add(
        f"  the warm-up before it (a cold JVM), {args.warmup:,} payments",
        f"{len(cold)}/{args.warmup} credited",
        f"{percentile(cold, 0.5):,.0f}",
        f"{percentile(cold, 0.99):,.0f}",
        f"{max(cold):,.0f}",
        "-",
        "-",
    )
    table.add(
        "  of which commit -> record on the topic",
        "-",
        f"{percentile(to_topic, 0.5):,.0f}",
        f"{percentile(to_topic, 0.99):,.0f}",
        f"{max(to_topic):,.0f}",
        "-",
        "-",
    )
    table.add(
        "  of which topic -> ledger MERGE returned",
        f"batch {latency['batch_ms']:,.0f} ms median, {latency['rows_per_batch']:g} rows",
        f"{percentile(to_ledger, 0.5):,.0f}",
        f"{percentile(to_ledger, 0.99):,.0f}",
        f"{max(to_ledger):,.0f}",
        "-",
        "-",
    )
    r = rates["rates"]
    bare, with_options, reader = (
        r["bare Kafka source"],
        r["Kafka source, reader's options"],
        r["reader (RocketMQ columns)"],
    )
    for name, value in r.items():
        table.add(
            f"{name}, {rates['rows'][name]:,} rows", f"{value:,.0f} rows/s", "-", "-", "-", "-", "-"
        )
    table.add(
        "reader / bare Kafka source",
        f"{reader / bare:.2f}",
        "-",
        "-",
        "-",
        ">= 0.8",
        verdict(reader / bare >= 0.8),
    )
    table.add(
        "reader / Kafka source with the reader's options",
        f"{reader / with_options:.2f}",
        "-",
        "-",
        "-",
        "-",
        "-",
    )
    table.add(
        "driver peak RSS (JVM VmHWM; Python)",
        f"{jvm_peak or 0:,.0f} MB; {python_peak:,.0f} MB",
        "-",
        "-",
        "-",
        "-",
        "-",
    )
    table.print(("measure", "result", "p50 ms", "p99 ms", "max ms", "target", "met?"))


if __name__ == "__main__":
    main()
