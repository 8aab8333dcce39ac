"""The points ledger: exactly one credit per committed payment, through duplicates, rolled-back
and aborted transactions, restarts, a SIGKILL of the driver mid-stream, and on a standalone
cluster as on local[2]."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from adapter import naming
from adapter import properties as prop
from adapter.client import TransactionStatus
from adapter.kafka import clients
from adapter.spark import ledger
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.points import run_points
from tests.spark.conftest import (
    Child,
    Payment,
    StandaloneCluster,
    cli_command,
    expected_balances,
    payment_message,
    payments,
    send_payments,
)
from tests.spark.conftest import (
    committed as committed_records,
)
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

# What two ledgers must agree on (credited_at and batch_id depend on when batches ran).
COMPARED = (
    "msg_id",
    "status",
    "reason",
    "order_id",
    "user_id",
    "amount",
    "currency",
    "points",
    "paid_at",
    "topic",
    "queue_id",
    "queue_offset",
    "transaction_id",
    "committed_at",
)


def ledger_of(spark: SparkSession, table: Path) -> list[dict[str, Any]]:
    rows = ledger.ledger_rows(spark, table).select(*COMPARED).orderBy("msg_id").collect()
    return [r.asDict() for r in rows]


def ledger_count(spark: SparkSession, table: Path) -> int:
    """Rows in a ledger another process may be creating (0 until its first commit).

    Looks at the files, not ``DeltaTable.isDeltaTable``: Delta caches a path it once found
    without a table, and answers False from then on."""
    if not ledger.table_exists(table):
        return 0
    return ledger.ledger_rows(spark, table).count()


def credited(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["status"] == ledger.CREDITED]


def raw_copy(bootstrap: str, record: Any) -> None:
    """Write a record again, value and headers unchanged (a redelivered duplicate)."""
    producer = clients.producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(record.topic(), record.value(), headers=record.headers())
    assert producer.flush(30) == 0


def test_each_committed_payment_is_credited_once_and_nothing_else_is(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    new_group: Callable[..., str],
    make_transaction_producer: Callable[..., Any],
    start_coordinator: Callable[..., Any],
) -> None:
    topic = new_topic(2, "OrderPaid")
    start_coordinator()
    producer = make_transaction_producer(new_group("PID_pay"), lambda _m: TransactionStatus.COMMIT)
    items = payments(12, prefix=unique("order"))
    committed, declined = items[:10], items[10:]
    for payment in items:
        status = TransactionStatus.ROLLBACK if payment in declined else TransactionStatus.COMMIT
        producer.send_message_in_transaction(
            payment_message(topic, payment), lambda _m, _a, s=status: s, None
        )
    records = committed_records(kafka_bootstrap, topic, len(committed))
    assert len(records) == len(committed)

    # A duplicate of a committed message (same msg id), a payment inside an aborted Kafka
    # transaction, and a body that is not an OrderPaid.
    raw_copy(kafka_bootstrap, records[0])
    aborted = clients.producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": unique("aborting")}
    )
    aborted.init_transactions(30)
    aborted.begin_transaction()
    ghost = payment_message(topic, Payment("order-ghost", "user-0", payments(1)[0].amount))
    aborted.produce(naming.kafka_topic(topic), ghost.body, headers=ghost.headers("GHOST-1"))
    aborted.abort_transaction(30)
    junk = clients.producer({"bootstrap.servers": kafka_bootstrap})
    junk.produce(
        naming.kafka_topic(topic), b'{"order": "not avro"}', headers=[(prop.UNIQ_KEY, b"JUNK-1")]
    )
    assert junk.flush(30) == 0

    config = job_config(Job.POINTS, topic, name="ledger")
    result = run_points(config, spark)
    assert result.input_rows == len(committed) + 2  # the duplicate and the junk were read
    assert (result.credited, result.rejected) == (len(committed), 1)
    assert result.balances == expected_balances(committed)
    rows = ledger_of(spark, config.table)
    assert sorted(r["order_id"] for r in credited(rows)) == sorted(p.order_id for p in committed)
    assert len({r["msg_id"] for r in rows}) == len(rows) == len(committed) + 1
    for row in credited(rows):
        assert row["transaction_id"] == row["msg_id"]
    (junk_row,) = [r for r in rows if r["status"] == ledger.REJECTED]
    assert junk_row["msg_id"] == "JUNK-1"
    assert junk_row["reason"] == "not an OrderPaid: no single-object marker"
    assert junk_row["points"] == 0

    # Run again from the checkpoint: nothing new, nothing counted twice.
    again = run_points(config, spark)
    assert again.input_rows == 0
    assert ledger_of(spark, config.table) == rows

    # New payments after the restart are credited, the old ones still once.
    later = payments(3, prefix=unique("later"))
    for payment in later:
        producer.send_message_in_transaction(
            payment_message(topic, payment), lambda _m, _a: TransactionStatus.COMMIT, None
        )
    committed_records(kafka_bootstrap, topic, len(committed) + 2 + len(later))
    third = run_points(config, spark)
    assert third.input_rows == len(later)
    assert third.credited == len(committed) + len(later)
    assert third.balances == expected_balances(committed + later)


def points_command(bootstrap: str, topic: str, config: SparkJobConfig, *extra: str) -> list[str]:
    """``rmq-adapter spark points`` on ``topic`` with ``config``'s checkpoint and ledger."""
    return cli_command(
        "points",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--checkpoint",
        str(config.checkpoint),
        "--table",
        str(config.table),
        *extra,
    )


def wait_for_the_driver(
    spark: SparkSession, driver: Child, config: SparkJobConfig, enough: Callable[[int], bool]
) -> None:
    """Wait until the ledger's row count is ``enough``, failing with the driver's output if
    the driver exits first."""
    wait_until(
        lambda: enough(ledger_count(spark, config.table)) or driver.process.poll() is not None,
        timeout=150,
        interval=0.5,
        what="the driver's first batch",
    )
    assert driver.process.poll() is None, driver.output[-3000:]


@pytest.mark.long  # a minute: a driver killed and started again
def test_a_driver_killed_mid_stream_restarts_from_its_checkpoint_with_an_exact_ledger(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_producer: Callable[..., Any],
    children: Callable[..., Child],
    tmp_path: Path,
) -> None:
    topic = new_topic(2, "OrderPaid")
    config = job_config(Job.POINTS, topic, name="killed")
    producer = make_producer()
    prefix = unique("order")
    first, second = payments(20, prefix=prefix), payments(40, prefix=prefix, start=20)
    send_payments(producer, topic, first)
    driver = children(
        points_command(kafka_bootstrap, topic, config, "--trigger-ms", "500"),
        tmp_path / "driver.log",
    )
    wait_for_the_driver(spark, driver, config, lambda credited: credited > 0)

    def keep_paying() -> None:
        for payment in second:
            send_payments(producer, topic, [payment])
            time.sleep(0.05)

    sending = threading.Thread(target=keep_paying, daemon=True)
    sending.start()
    time.sleep(1.0)  # batches are running while payments keep arriving
    driver.kill()  # SIGKILL: the Python driver and its JVM, no chance to clean up
    assert driver.process.returncode == -9
    sending.join(60)
    before_restart = ledger_count(spark, config.table)
    assert 0 < before_restart < len(first) + len(second)

    result = run_points(config, spark)
    rows = ledger_of(spark, config.table)
    everything = first + second
    assert sorted(r["order_id"] for r in rows) == sorted(p.order_id for p in everything)
    assert len({r["msg_id"] for r in rows}) == len(rows) == len(everything)
    assert result.balances == expected_balances(everything)
    assert result.credited == len(everything)


@pytest.mark.long  # a minute: a streaming driver started and stopped
def test_ctrl_c_stops_a_streaming_points_job_between_batches_with_its_summary(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_producer: Callable[..., Any],
    children: Callable[..., Child],
    tmp_path: Path,
) -> None:
    topic = new_topic(2, "OrderPaid")
    config = job_config(Job.POINTS, topic, name="interrupted")
    paid = payments(10, prefix=unique("order"))
    send_payments(make_producer(), topic, paid)
    driver = children(points_command(kafka_bootstrap, topic, config), tmp_path / "driver.log")
    wait_for_the_driver(spark, driver, config, lambda credited: credited == len(paid))

    os.killpg(driver.process.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole group

    assert driver.wait(90) == 0, driver.output[-3000:]
    assert "Aborted" not in driver.output
    assert f"{len(paid)} payments credited" in driver.output
    assert ledger_count(spark, config.table) == len(paid)


@pytest.mark.long  # a minute: a standalone master and worker start
def test_the_points_job_runs_unchanged_on_a_standalone_cluster_with_the_same_ledger(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    make_producer: Callable[..., Any],
    standalone_cluster: StandaloneCluster,
    children: Callable[..., Child],
    tmp_path: Path,
) -> None:
    topic = new_topic(2, "OrderPaid")
    items = payments(25, prefix=unique("order"))
    send_payments(make_producer(), topic, items)
    records = committed_records(kafka_bootstrap, topic, len(items))
    raw_copy(kafka_bootstrap, records[3])

    on_cluster = job_config(Job.POINTS, topic, name="cluster")
    driver = children(
        points_command(
            kafka_bootstrap,
            topic,
            on_cluster,
            "--master",
            standalone_cluster.master_url,
            "--available-now",
            "--json",
            str(tmp_path / "result.json"),
        ),
        tmp_path / "cluster-driver.log",
    )
    # The same job on local[2] in this process meanwhile, from its own checkpoint and table.
    on_local = job_config(Job.POINTS, topic, name="local")
    local = run_points(on_local, spark)

    assert driver.wait(200) == 0, driver.output[-3000:]
    printed = json.loads((tmp_path / "result.json").read_text())
    assert (printed["job"], printed["credited"], printed["input_rows"]) == ("points", 25, 26)
    assert "25 payments credited, 0 rejected; this run read 26 messages" in driver.output
    wait_until(  # the master lists the application once its driver has stopped
        lambda: (
            [a["name"] for a in standalone_cluster.state()["completedapps"]]
            == ["rmq-adapter-points"]
        ),
        timeout=30,
        interval=0.5,
        what="the master to list the points application as completed",
    )

    assert local.balances == printed["balances"] == expected_balances(items)
    assert ledger_of(spark, on_cluster.table) == ledger_of(spark, on_local.table)
