"""The message index: ``rmq-adapter spark index`` on real Kafka and real Spark, and
``message query|show --index`` answering from it (read without Spark) as the scan answers,
complete for messages sent after the index ran.

One index run is shared by the module's tests (a Spark query costs seconds to start)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from adapter import naming
from adapter.client import Message, Producer
from adapter.ops.cli import main as cli
from adapter.ops.message_index import ENV_INDEX, MessageIndex
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.index import run_index
from tests.spark.conftest import committed
from tests.support import unique

# A minute in all: a Spark job indexes a topic first (make test-long).
pytestmark = [pytest.mark.kafka, pytest.mark.long, pytest.mark.timeout(240)]

KEYS = ["order-1 shop-a", "order-2 shop-a", "order-3 shop-b", "order-4", "order-5", "order-6"]


@dataclass(frozen=True)
class Indexed:
    bootstrap: str
    topic: str
    table: Path
    ids: list[str]
    """The ids of the indexed messages, in the order of KEYS."""
    late_id: str
    """A message sent after the index ran (key ``late-1``)."""
    reruns_read: int
    """Records the second run of the job, on the same checkpoint, read."""


def message(topic: str, keys: str) -> Message:
    msg = Message(topic)
    msg.set_keys(keys)
    msg.set_tags("paid" if "shop-a" in keys else "other")
    msg.set_body(keys)
    return msg


@pytest.fixture(scope="module")
def indexed(
    spark: SparkSession, kafka_bootstrap: str, admin: AdminClient, tmp_path_factory
) -> Iterator[Indexed]:
    topic = unique("Indexed")
    for future in admin.create_topics([NewTopic(naming.kafka_topic(topic), 2, 1)]).values():
        future.result(timeout=30)
    producer = Producer(unique("PID"))
    producer.set_name_server_address(kafka_bootstrap)
    producer.start()
    try:
        ids = [producer.send_sync(message(topic, keys)).msg_id for keys in KEYS]
        committed(kafka_bootstrap, topic, len(KEYS))
        work = tmp_path_factory.mktemp("index")
        config = SparkJobConfig.from_env(
            Job.INDEX, environ={}, bootstrap=kafka_bootstrap, topics=(topic,),
            checkpoint=work / "checkpoint", table=work / "table", available_now=True,
        )  # fmt: skip
        run_index(config, spark)
        rerun = run_index(config, spark)
        late_id = producer.send_sync(message(topic, "late-1")).msg_id
        committed(kafka_bootstrap, topic, len(KEYS) + 1)
        yield Indexed(kafka_bootstrap, topic, work / "table", ids, late_id, rerun.input_rows)
    finally:
        producer.shutdown()
        admin.delete_topics([naming.kafka_topic(topic)], operation_timeout=30)


def run(indexed: Indexed, *args: str, index: Path | None = None) -> Result:
    more = ["--index", str(index)] if index is not None else []
    return CliRunner().invoke(
        cli, ["message", *args, "--bootstrap", indexed.bootstrap, "--timeout", "30", *more]
    )


def found_rows(output: str) -> list[str]:
    """The table lines of a query's or show's output (what was found, not how)."""
    return [line for line in output.splitlines() if "@" in line]


def test_the_job_indexes_every_record_once_with_its_keys_tag_and_place(
    indexed: Indexed, spark: SparkSession
) -> None:
    rows = spark.read.format("delta").load(str(indexed.table)).orderBy("msg_id").collect()
    assert sorted(r["msg_id"] for r in rows) == sorted(indexed.ids), "one row per record"
    by_id = {r["msg_id"]: r for r in rows}
    first = by_id[indexed.ids[0]]
    assert first["keys"] == ["order-1", "shop-a"], "KEYS split on spaces"
    assert (first["tags"], first["topic"]) == ("paid", indexed.topic)
    assert first["born_time"] is not None
    assert first["stored_time"] is not None
    assert indexed.reruns_read == 0, "a second run on the same checkpoint indexes nothing again"
    reach = MessageIndex(indexed.table).high_water([indexed.topic])
    assert sum(reach.values()) == len(KEYS), "without Spark: the index reaches every record"


def test_query_by_key_answers_from_the_index_as_the_scan_does(indexed: Indexed) -> None:
    query = ("query", "--topic", indexed.topic, "--key", "shop-a")
    by_scan = run(indexed, *query)
    by_index = run(indexed, *query, index=indexed.table)
    assert by_index.exit_code == 0, by_index.output
    assert "source: scan" in by_scan.output
    assert "2 messages found; source: index, which found 2 records" in by_index.output
    assert "scanned 1 records of 1 topics" in by_index.output, "only the record after it"
    assert found_rows(by_index.output) == found_rows(by_scan.output)
    assert {indexed.ids[0], indexed.ids[1]} <= set(by_index.output.split())


def test_show_answers_from_the_index_given_by_the_environment(indexed: Indexed) -> None:
    show = ["message", "show", indexed.ids[2], "--topic", indexed.topic,
            "--bootstrap", indexed.bootstrap]  # fmt: skip
    by_scan = CliRunner().invoke(cli, show)
    by_index = CliRunner(env={ENV_INDEX: str(indexed.table)}).invoke(cli, show)
    assert by_index.exit_code == 0, by_index.output
    assert "(source: index, which found 1 record;" in by_index.output
    assert found_rows(by_index.output) == found_rows(by_scan.output)
    assert len(found_rows(by_index.output)) == 1, by_index.output


def test_a_message_sent_after_the_index_ran_is_found_in_the_tail(indexed: Indexed) -> None:
    by_key = run(indexed, "query", "--topic", indexed.topic, "--key", "late-1",
                 index=indexed.table)  # fmt: skip
    assert "1 message found; source: index, which found 0 records" in by_key.output
    assert indexed.late_id in by_key.output
    shown = run(indexed, "show", indexed.late_id, "--topic", indexed.topic, index=indexed.table)
    assert shown.exit_code == 0, shown.output
    assert f"delivered  {indexed.topic}[" in shown.output


def test_a_missing_or_corrupt_index_is_one_clear_line(indexed: Indexed, tmp_path: Path) -> None:
    missing = run(indexed, "show", indexed.ids[0], index=tmp_path / "nowhere")
    assert missing.exit_code == 1
    assert missing.output.startswith(f"Error: no message index at {tmp_path / 'nowhere'}")
    log = tmp_path / "broken" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("not json\n")
    broken = run(indexed, "query", "--topic", indexed.topic, "--key", "x", index=log.parent)
    assert broken.exit_code == 1
    assert broken.output.startswith(f"Error: the message index at {log.parent} cannot be read")
    assert len(broken.output.strip().splitlines()) == 1, broken.output


def test_a_topic_the_index_does_not_cover_is_scanned_and_says_so(
    indexed: Indexed, new_topic, make_producer
) -> None:
    other = new_topic(1, "NotIndexed")
    sent = make_producer().send_sync(message(other, "order-9")).msg_id
    by_key = run(indexed, "query", "--topic", other, "--key", "order-9", index=indexed.table)
    assert by_key.exit_code == 0, by_key.output
    assert sent in by_key.output
    assert "1 message found; scanned 1 records of 1 topics in the window; source: scan" in (
        by_key.output
    )
