"""The reader's columns, from real messages of each kind, against the adapter's own consumer.

A normal, a delayed (delivered by a real schedule forwarder), a transactional (committed by a
real transaction coordinator) and a retried message (sent back by a real ``PushConsumer``,
delivered through ``%RETRY%<group>``) are read by the Spark reader and compared, column by
column, with what ``PushConsumer`` callbacks received for the same records.
"""

from __future__ import annotations

import random
import string
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from adapter import naming
from adapter import properties as prop
from adapter.client import ConsumeStatus, Message, ReceivedMessage, TransactionStatus
from adapter.kafka import clients
from adapter.spark.columns import MESSAGE_COLUMNS, decode_topic, header_map
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.reader import kafka_source, read_messages
from adapter.spark.system_topics import decode_system
from adapter.wire import codec
from adapter.wire.records import OpKind, OpRecord, ScheduledMessage
from tests.support import send, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


def collect_stream(spark: SparkSession, frame: DataFrame, checkpoint: Path) -> list[Row]:
    """Everything a streaming DataFrame holds now (an availableNow run into a memory table)."""
    name = f"t_{checkpoint.parent.name}_{checkpoint.name}".replace("-", "_")
    query = (
        frame.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
        assert query.exception() is None
        return spark.table(name).collect()
    finally:
        query.stop()


def ms(row: Row, column: str) -> int:
    return int(row[f"{column}_ms"])


def test_the_reader_gives_each_kind_of_message_the_columns_a_rocketmq_consumer_sees(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    new_topic: Callable[..., str],
    new_group: Callable[..., str],
    make_producer: Callable[..., Any],
    make_consumer: Callable[..., Any],
    make_transaction_producer: Callable[..., Any],
    start_forwarder: Callable[..., Any],
    start_coordinator: Callable[..., Any],
    tmp_path: Path,
) -> None:
    topic = new_topic(2, "Reader")
    group, tx_group = new_group(), new_group("PID_tx")
    start_forwarder()
    start_coordinator()
    seen: list[ReceivedMessage] = []
    lock = threading.Lock()

    def consume(message: ReceivedMessage) -> ConsumeStatus:
        with lock:
            seen.append(message)
        if message.keys == b"retry-me" and message.reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    make_consumer(group, topic, consume)
    producer = make_producer()
    normal = send(producer, topic, b"normal body", tags="TagA", keys="k-normal", color="blue")
    delayed_message = Message(topic)
    delayed_message.set_body(b"delayed body")
    delayed_message.set_keys("k-delayed")
    delayed_message.set_delay_time_level(1)
    delayed = producer.send_sync(delayed_message)
    retried = send(producer, topic, b"retried body", keys="retry-me")
    tx_message = Message(topic)
    tx_message.set_body(b"transactional body")
    tx_message.set_keys("k-tx")
    tx_message.set_tags("Paid")
    tx_producer = make_transaction_producer(tx_group, lambda _m: TransactionStatus.COMMIT)
    committed = tx_producer.send_message_in_transaction(
        tx_message, lambda _m, _a: TransactionStatus.COMMIT, None
    )

    def all_delivered() -> bool:
        with lock:
            return len(seen) >= 5  # normal, delayed, transactional, retried twice

    wait_until(all_delivered, timeout=60, interval=0.2, what="five deliveries to the consumer")

    config = job_config(Job.POINTS, topic, naming.retry_topic(group), name="reader")
    frame = read_messages(spark, config).select(
        "*",
        F.unix_millis("born_timestamp").alias("born_timestamp_ms"),
        F.unix_millis("store_timestamp").alias("store_timestamp_ms"),
    )
    rows = collect_stream(spark, frame, tmp_path / "reader" / "memory")
    assert len(rows) == 5
    by_position = {(r["topic"], r["queue_id"], r["queue_offset"]): r for r in rows}
    assert list(rows[0].asDict())[: len(MESSAGE_COLUMNS)] == list(MESSAGE_COLUMNS)

    with lock:
        deliveries = list(seen)
    for message in deliveries:
        row = by_position[
            (naming.decode(message.kafka_topic), message.queue_id, message.queue_offset)
        ]
        properties = {k: v.decode() for k, v in message.properties.items()}
        assert row["msg_id"] == message.id
        assert row["keys"] == (message.keys.decode() or None)
        assert row["tags"] == (message.tags.decode() or None)
        assert row["properties"] == properties
        assert row["body"] == message.body
        assert ms(row, "born_timestamp") == message.born_timestamp
        assert ms(row, "store_timestamp") == message.store_timestamp
        assert row["reconsume_times"] == message.reconsume_times
        assert row["transaction_id"] == properties.get(prop.TRANSACTION_ID)
        assert row["delay_level"] == message.delay_time_level

    by_id: dict[str, list[Row]] = {}
    for row in rows:
        by_id.setdefault(row["msg_id"], []).append(row)

    (plain,) = by_id[normal.msg_id]
    assert (plain["topic"], plain["keys"], plain["tags"]) == (topic, "k-normal", "TagA")
    assert plain["properties"]["color"] == "blue"
    assert plain["transaction_id"] is None
    assert plain["reconsume_times"] == 0
    assert ms(plain, "born_timestamp") == ms(plain, "store_timestamp")

    (late,) = by_id[delayed.msg_id]
    assert late["topic"] == topic
    assert late["body"] == b"delayed body"
    assert late["properties"][prop.REAL_TOPIC] == topic
    assert prop.DELAY not in late["properties"]  # dropped on delivery, as RocketMQ does
    assert late["delay_level"] == 0
    assert ms(late, "store_timestamp") - ms(late, "born_timestamp") >= 1000  # level 1 = 1 s

    (tx,) = by_id[committed.msg_id]
    assert tx["transaction_id"] == committed.msg_id
    assert tx["properties"][prop.PRODUCER_GROUP] == tx_group
    assert tx["tags"] == "Paid"
    assert tx["body"] == b"transactional body"
    assert prop.TRANSACTION_PREPARED not in tx["properties"]

    first, again = sorted(by_id[retried.msg_id], key=lambda r: r["reconsume_times"])
    assert (first["topic"], first["reconsume_times"]) == (topic, 0)
    assert again["topic"] == f"%RETRY%{group}"
    assert again["reconsume_times"] == 1
    assert again["properties"][prop.RETRY_TOPIC] == topic
    assert again["properties"][prop.ORIGIN_MESSAGE_ID] == retried.msg_id
    assert ms(again, "born_timestamp") == ms(first, "born_timestamp")
    assert again["body"] == b"retried body"


def test_topic_names_decode_exactly_as_adapter_naming_does(spark: SparkSession) -> None:
    rng = random.Random(11)
    alphabet = string.ascii_letters + string.digits + "%|_-."
    names = [
        ".25RETRY.25GID_a",
        ".25DLQ.25G.7Cx",
        ".257C",
        "..25",
        ".7c",
        "a.2",
        ".",
        "plain",
        "x.25.25.7C.7C.",
        *(
            naming.encode("".join(rng.choices(string.ascii_letters + "%|_-", k=12)))
            for _ in range(100)
        ),
        *("".join(rng.choices(alphabet, k=rng.randint(1, 14))) for _ in range(300)),
    ]
    frame = spark.createDataFrame([(n,) for n in names], "name string")
    decoded = {
        r["name"]: r["decoded"]
        for r in frame.select("name", decode_topic(F.col("name")).alias("decoded")).collect()
    }
    assert decoded == {n: naming.decode(n) for n in names}


def test_headers_become_a_map_where_the_last_value_of_a_key_wins_and_nulls_are_left_out(
    spark: SparkSession,
) -> None:
    headers = [
        ("TAGS", b"first"),
        ("KEYS", b"k"),
        ("TAGS", b"last"),
        ("EMPTY", b""),
        ("NULL", None),
        ("caf\u00e9", "\u00e9t\u00e9".encode()),
    ]
    frame = spark.createDataFrame(
        [(headers,), ([],), (None,)], "headers array<struct<key:string,value:binary>>"
    )
    maps = [r["m"] for r in frame.select(header_map(F.col("headers")).alias("m")).collect()]
    assert maps[0] == {"TAGS": "last", "KEYS": "k", "EMPTY": "", "caf\u00e9": "\u00e9t\u00e9"}
    assert maps[1] == {}
    assert maps[2] == {}


def test_the_system_reader_decodes_after_the_single_object_header_and_names_bad_records(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    new_topic: Callable[..., str],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    topic = new_topic(1, "System")
    scheduled = ScheduledMessage(
        level=3,
        topic="OrderEvents",
        queue_id=-1,
        key=b"k1",
        tags="TagA",
        keys="order-1 order-2",
        properties={"amount": "30", "BORN_TIMESTAMP": "1700000000000"},
        body=b"\x00\x01body",
        born_timestamp=1_700_000_000_000,
        unique_key="7F00000100000000000000000000000A",
        reconsume_times=2,
    )
    op = OpRecord(
        transaction_id="tx-1",
        half_partition=0,
        half_offset=7,
        kind=OpKind.COMMIT,
        check_times=0,
        producer_group="PID_x",
        timestamp=1_700_000_000_000,
    )
    header = codec.MARKER + codec.fingerprint(ScheduledMessage)
    values = [
        codec.encode(scheduled),
        codec.encode(op),  # a record of another schema
        b"not avro at all",
        header + b"\xff\xff\xff",  # the right header, a body that does not decode
        codec.MARKER + b"abc",  # shorter than the header
    ]
    producer = clients.producer({"bootstrap.servers": kafka_bootstrap})
    for value in values:
        producer.produce(naming.kafka_topic(topic), value, partition=0)
    assert producer.flush(30) == 0

    config = job_config(Job.TELEMETRY, topic, name="system")
    frame = decode_system(kafka_source(spark, config, topics=[topic]), ScheduledMessage)
    rows = sorted(
        collect_stream(spark, frame, tmp_path / "system" / "memory"),
        key=lambda r: r["queue_offset"],
    )
    assert [r["error"] for r in rows] == [
        None,
        f"unknown schema fingerprint {(codec.MARKER + codec.fingerprint(OpRecord)).hex().upper()}",
        "no single-object marker",
        "body does not decode",
        "shorter than the 10-byte header",
    ]
    assert [r["record"] is None for r in rows] == [False, True, True, True, True]
    record = rows[0]["record"].asDict()
    assert int(record.pop("born_timestamp").timestamp() * 1000) == scheduled.born_timestamp
    assert record == {
        "level": 3,
        "topic": "OrderEvents",
        "queue_id": -1,
        "key": b"k1",
        "tags": "TagA",
        "keys": "order-1 order-2",
        "properties": {"amount": "30", "BORN_TIMESTAMP": "1700000000000"},
        "body": b"\x00\x01body",
        "unique_key": "7F00000100000000000000000000000A",
        "reconsume_times": 2,
    }
