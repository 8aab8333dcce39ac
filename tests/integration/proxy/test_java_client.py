"""The official RocketMQ 5.x Java client (``rocketmq-client-java`` 5.0.8 from Maven Central,
unchanged) sends through the proxy with only its endpoint set, over TLS as it defaults to:
normal, FIFO and delay messages; a transaction committed, one rolled back and one committed by
its ``TransactionChecker``; a timer recalled. What it commits is received once by the
``adapter.client`` PushConsumer and the ``adapter.v5`` SimpleConsumer; what it rolls back by
none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapter import naming
from adapter import properties as prop
from adapter.producer.routing import queue_for_sharding_key
from tests.integration.proxy import java
from tests.integration.proxy.conftest import RunningProxy
from tests.integration.proxy.reads import all_records, records_with_ids, uniq
from tests.support import Recorder, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

RunJava = Callable[..., java.JavaProgram]


@pytest.fixture(scope="session")
def classpath() -> str:
    return java.build()


@pytest.fixture
def run_java(classpath: str, tmp_path: Path) -> RunJava:
    def run(*args: str, env: dict[str, str] | None = None) -> java.JavaProgram:
        return java.JavaProgram(classpath, tmp_path, *args, env=env)

    return run


def test_normal_fifo_and_delay_sends_arrive_over_tls(
    proxy: RunningProxy, run_java: RunJava, new_topic, start_forwarder, system_topics: str
) -> None:
    normal, fifo, delay = (
        new_topic(partitions=3, prefix=p) for p in ("JNormal", "JFifo", "JDelay")
    )
    start_forwarder()
    program = run_java("sends", proxy.endpoint, normal, fifo, delay)
    program.finish()

    [[normal_id]] = program.words("SENT NORMAL")
    [record] = records_with_ids(system_topics, naming.kafka_topic(normal), {normal_id})
    headers = dict(record.headers())
    assert (record.value(), headers[prop.TAGS], headers[prop.KEYS]) == (
        b"normal",
        b"TagJ",
        b"normal",
    )
    assert headers["from"] == b"java"

    fifo_ids = {words[0] for words in program.words("SENT FIFO")}
    ordered = records_with_ids(system_topics, naming.kafka_topic(fifo), fifo_ids)
    assert {r.partition() for r in ordered} == {queue_for_sharding_key("java-group", 3)}
    assert [r.value() for r in sorted(ordered, key=lambda r: r.offset())] == [
        b"fifo-0", b"fifo-1", b"fifo-2"
    ]  # fmt: skip

    [[delay_id, deliver_at]] = program.words("SENT DELAY")
    [later] = records_with_ids(system_topics, naming.kafka_topic(delay), {delay_id}, timeout=60)
    assert later.timestamp()[1] >= int(deliver_at), "not before its delivery time"


def test_plaintext_works_too(
    proxy: RunningProxy, run_java: RunJava, new_topic, system_topics: str
) -> None:
    topic = new_topic(partitions=1, prefix="JPlain")
    program = run_java(
        "sends", proxy.endpoint, topic, topic, topic, env={"RMQ_TEST_TRANSPORT": "plaintext"}
    )
    program.finish()
    [[normal_id]] = program.words("SENT NORMAL")
    assert records_with_ids(system_topics, naming.kafka_topic(topic), {normal_id})


def java_transactions(
    proxy: RunningProxy, run_java: RunJava, topic: str, start_coordinator: Any
) -> dict[str, str]:
    """Run the transactions scenario; message id -> COMMIT, ROLLBACK or UNKNOWN. RocketMQ's
    default transaction timeout (6 s): a commit that a loaded machine (a JVM, Spark, the
    proxy) delays past a shorter one would be checked too, as RocketMQ would check it."""
    start_coordinator(transaction_timeout_ms=6000, check_interval_ms=3000)
    program = run_java("transactions", proxy.endpoint, topic)
    program.finish()
    decided = {words[0]: words[1] for words in program.words("DECIDED")}
    checked = {words[0] for words in program.words("CHECKED")}
    unknown = {i for i, kind in decided.items() if kind == "UNKNOWN"}
    assert checked == unknown, "only the transaction left UNKNOWN is checked"
    return decided


def test_committed_rolled_back_and_checker_committed_transactions(
    proxy: RunningProxy, run_java: RunJava, new_topic, start_coordinator, system_topics: str
) -> None:
    topic = new_topic(partitions=2, prefix="JTx")
    decided = java_transactions(proxy, run_java, topic, start_coordinator)
    committed = {i for i, kind in decided.items() if kind in ("COMMIT", "UNKNOWN")}
    records_with_ids(system_topics, naming.kafka_topic(topic), committed, timeout=60)
    everything = all_records(system_topics, naming.kafka_topic(topic), quiet_s=2)
    assert sorted(uniq(r) for r in everything) == sorted(committed), "each once, no rollback"
    by_id = {uniq(r): dict(r.headers()) for r in everything}
    [unknown] = [i for i, kind in decided.items() if kind == "UNKNOWN"]
    assert int(by_id[unknown][prop.TRANSACTION_CHECK_TIMES]) >= 1
    assert by_id[unknown][prop.PRODUCER_GROUP] == topic.encode()


def test_a_recalled_timer_is_never_delivered(
    proxy: RunningProxy, run_java: RunJava, new_topic, start_forwarder, system_topics: str
) -> None:
    topic = new_topic(partitions=1, prefix="JRecall")
    start_forwarder()
    program = run_java("recall", proxy.endpoint, topic)
    program.finish()
    sent = {words[0]: words[1] for words in program.words("SENT")}
    assert [w[0] for w in program.words("RECALLED")] == [sent["recalled"]]
    records_with_ids(system_topics, naming.kafka_topic(topic), {sent["kept"]}, timeout=60)
    everything = all_records(system_topics, naming.kafka_topic(topic), quiet_s=2)
    assert [uniq(r) for r in everything] == [sent["kept"]]


def test_a_java_transaction_is_received_once_by_the_python_consumers_and_a_rollback_by_none(
    proxy: RunningProxy,
    run_java: RunJava,
    new_topic,
    start_coordinator,
    make_consumer,
    system_topics: str,
) -> None:
    from adapter.v5 import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    topic = new_topic(partitions=2, prefix="JInterop")
    pushed = Recorder()
    make_consumer(unique("GID_push"), topic, pushed)
    simple = SimpleConsumer(
        ClientConfiguration(system_topics, Credentials()),
        unique("GID_simple"),
        {topic: FilterExpression()},
        2,
        lock_duration=15,
    )
    simple.startup()
    try:
        decided = java_transactions(proxy, run_java, topic, start_coordinator)
        committed = sorted(i for i, kind in decided.items() if kind in ("COMMIT", "UNKNOWN"))
        received: list[str] = []

        def simple_received_all() -> bool:
            for message in simple.receive(16, 10):
                received.append(str(message.message_id))
                simple.ack(message)
            return len(received) >= len(committed)

        wait_until(simple_received_all, timeout=60, what="the SimpleConsumer's messages")
        wait_until(lambda: len(pushed) >= len(committed), timeout=60, what="the pushed ones")
        assert not simple.receive(16, 10)  # nothing more: no rollback, no second copy
    finally:
        simple.shutdown()
    assert sorted(received) == committed
    assert sorted(m.id for m in pushed.messages) == committed
    assert {m.body for m in pushed.messages} == {b"COMMIT", b"UNKNOWN"}
