"""The 5.x client's own producer and consumer examples run on Kafka with only their import
and endpoints changed (``examples/``, ported from apache/rocketmq-clients ``python/example/``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import naming
from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.kafka import clients
from adapter.producer.routing import queue_for_sharding_key
from tests.brokers import ROOT
from tests.support import init_system_topics, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

EXAMPLES = Path(__file__).parent / "examples"
TOPIC = "topic"  # the examples' own topic
ENDPOINTS = 'endpoints = "foobar.com:8080"'
MESSAGE_ID = re.compile(r"message_id:\s?([0-9A-F]{32})")


class Example:
    """One example, run as a script with the test broker's endpoints; its output is kept."""

    def __init__(self, name: str, bootstrap: str, tmp_path: Path) -> None:
        source = (EXAMPLES / name).read_text()
        assert source.count(ENDPOINTS) == 1, f"{name} sets its endpoints once"
        script = tmp_path / name
        script.write_text(source.replace(ENDPOINTS, f'endpoints = "{bootstrap}"'))
        self.process = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def printed(self, text: str, count: int = 1, timeout: float = 60) -> list[str]:
        """The lines holding ``text``, once there are ``count`` of them."""

        def found() -> list[str]:
            lines = [line for line in list(self.lines) if text in line]
            if len(lines) < count and self.process.poll() is not None:
                self._drainer.join(5)
                raise AssertionError(f"the example ended early:\n{''.join(self.lines)}")
            return lines if len(lines) >= count else []

        return wait_until(found, timeout=timeout, what=f"{count} x {text!r}")

    def press_enter(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def finish(self, timeout: float = 60) -> str:
        try:
            code = self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        self._drainer.join(5)
        output = "".join(self.lines)
        assert code == 0, output
        assert "exception" not in output, output
        return output


def ensure_topic(admin: AdminClient, topic: str) -> None:
    futures = admin.create_topics([NewTopic(topic, 4, 1)])
    for future in futures.values():
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - only "already exists" is fine
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def records_with_ids(bootstrap: str, topic: str, ids: set[str], timeout: float = 60) -> list:
    """The records of ``topic`` whose ``UNIQ_KEY`` is one of ``ids``, once all are there."""
    reader = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    found: list = []
    try:
        partitions = reader.list_topics(topic, timeout=10).topics[topic].partitions
        reader.assign([TopicPartition(topic, p, 0) for p in partitions])
        deadline = time.monotonic() + timeout
        while {dict(r.headers())[prop.UNIQ_KEY].decode() for r in found} != ids:
            assert time.monotonic() < deadline, f"not all of {ids} reached {topic}"
            for record in reader.consume(500, 0.2):
                uniq = dict(record.headers() or []).get(prop.UNIQ_KEY, b"").decode()
                if record.error() is None and uniq in ids:
                    found.append(record)
    finally:
        reader.close()
    return found


@pytest.fixture
def example_topic(admin: AdminClient, system_topics: str) -> str:
    ensure_topic(admin, TOPIC)
    return system_topics


def test_the_normal_producer_example_sends_its_message(example_topic: str, tmp_path) -> None:
    example = Example("normal_producer_example.py", example_topic, tmp_path)
    [sent] = example.printed("send message success")
    example.finish()

    message_id = MESSAGE_ID.search(sent).group(1)  # type: ignore[union-attr]
    [record] = records_with_ids(example_topic, TOPIC, {message_id})
    headers = dict(record.headers())
    assert record.value() == b"hello, rocketmq."
    assert headers[prop.TAGS] == b"rocketmq-send-message"
    assert headers[prop.KEYS] == b"send_sync"
    assert headers["send"] == b"sync"


def test_the_async_producer_example_sends_its_ten_messages(example_topic: str, tmp_path) -> None:
    example = Example("async_producer_example.py", example_topic, tmp_path)
    sent = example.printed("send message success", count=10)
    example.press_enter()
    example.finish()

    message_ids = {MESSAGE_ID.search(line).group(1) for line in sent}  # type: ignore[union-attr]
    assert len(message_ids) == 10
    records = records_with_ids(example_topic, TOPIC, message_ids)
    assert {dict(r.headers())["send"] for r in records} == {b"async"}


def test_the_transaction_producer_example_is_committed_by_its_own_checker(
    example_topic: str, start_coordinator, tmp_path
) -> None:
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    example = Example("transaction_producer_example.py", example_topic, tmp_path)
    [sent] = example.printed("send message: ")
    message_id = MESSAGE_ID.search(sent).group(1)  # type: ignore[union-attr]
    example.printed(f"do TestChecker check, topic:{TOPIC}, message_id: {message_id}")
    [record] = records_with_ids(example_topic, TOPIC, {message_id})
    example.press_enter()
    example.finish()

    headers = dict(record.headers())
    assert record.value() == b"hello, rocketmq."
    assert headers[prop.TAGS] == b"rocketmq-send-transaction-message"
    assert headers[prop.TRANSACTION_CHECK_TIMES] == b"1"


def test_the_async_simple_consumer_example_receives_and_acks_what_is_sent(
    example_topic: str, make_v5_producer, tmp_path
) -> None:
    from adapter.v5 import Message

    example = Example("async_simple_consumer_example.py", example_topic, tmp_path)
    message = Message()
    message.topic = TOPIC
    message.body = b"hello, simple consumer."
    try:
        sent = make_v5_producer().send(message)
        example.printed(f"ack message:{sent.message_id}.", timeout=60)
    finally:
        example.process.kill()  # it receives forever, as upstream's does
        example.process.wait(10)
    assert "exception" not in "".join(example.lines)


def test_the_fifo_producer_example_sends_its_message_in_its_group_s_queue(
    example_topic: str, admin: AdminClient, tmp_path
) -> None:
    ensure_topic(admin, "fifo-topic")
    example = Example("fifo_producer_example.py", example_topic, tmp_path)
    [sent] = example.printed("send message success")
    example.finish()

    message_id = MESSAGE_ID.search(sent).group(1)  # type: ignore[union-attr]
    [record] = records_with_ids(example_topic, "fifo-topic", {message_id})
    assert dict(record.headers())[prop.SHARDING_KEY] == b"your-message-group0"
    assert record.partition() == queue_for_sharding_key("your-message-group0", 4)


@pytest.mark.long  # about a minute: two example programs in turn
def test_the_simple_and_push_consumer_examples_share_their_group_s_progress(
    own_kafka, tmp_path
) -> None:
    """Upstream's simple and push consumer examples both use "consumer-group", as RocketMQ 5
    allows: what the simple consumer acked, the push consumer does not get again; what came
    after, it gets. On a broker of its own, where that group is new."""
    from adapter.v5 import ClientConfiguration, Credentials, Message, Producer

    bootstrap = own_kafka.bootstrap
    init_system_topics(bootstrap, DelayLevels.parse())
    ensure_topic(clients.admin({"bootstrap.servers": bootstrap}), TOPIC)
    producer = Producer(ClientConfiguration(bootstrap, Credentials()), (TOPIC,))
    producer.startup()

    def send(body: bytes) -> str:
        message = Message()
        message.topic, message.body = TOPIC, body
        return producer.send(message).message_id

    try:
        acked = [send(b"for the simple consumer %d" % n) for n in range(3)]
        simple = Example("simple_consumer_example.py", bootstrap, tmp_path)
        try:
            for message_id in acked:
                simple.printed(f"ack message:[{message_id}].")
        finally:
            simple.process.kill()  # it receives forever, as upstream's does
            simple.process.wait(10)
        left = [send(b"for the push consumer %d" % n) for n in range(3)]
        push = Example("push_consumer_example.py", bootstrap, tmp_path)
        for message_id in left:
            push.printed(f"message_id: {message_id}.")
        time.sleep(3)  # time enough for any acked message to come back, were it to
    finally:
        producer.shutdown()
    push.press_enter()
    output = push.finish()  # upstream's example leaves without shutdown(): the process must end

    assert not [message_id for message_id in acked if message_id in output]
    assert "exception" not in "".join(simple.lines)


def test_the_delay_producer_example_s_message_arrives_ten_seconds_later_not_before(
    example_topic: str, admin: AdminClient, start_forwarder, tmp_path
) -> None:
    """Upstream's example gives ``delivery_timestamp`` in seconds (``int(time.time()) + 10``);
    it is read as such."""
    ensure_topic(admin, "delay-topic")
    start_forwarder()
    example = Example("delay_producer_example.py", example_topic, tmp_path)
    [sent] = example.printed("send message success")
    sent_at = time.time() * 1000
    example.finish()

    message_id = MESSAGE_ID.search(sent).group(1)  # type: ignore[union-attr]
    [record] = records_with_ids(example_topic, "delay-topic", {message_id}, timeout=60)
    deliver_at = int(dict(record.headers())[prop.TIMER_DELIVER_MS])
    assert 8_000 <= deliver_at - sent_at <= 10_500, "ten seconds from the example's send"
    assert record.timestamp()[1] >= deliver_at, "not before"
    assert record.value() == b"hello, rocketmq."


def test_the_priority_producer_example_sends_each_priority_to_its_band(
    example_topic: str, admin: AdminClient, tmp_path
) -> None:
    """Its topic is made for priorities 0-4 here: 5-9 go to the highest band, 4."""
    for band in range(5):
        ensure_topic(admin, naming.priority_topic("priority-topic", band))
    example = Example("priority_producer_example.py", example_topic, tmp_path)
    sent = example.printed("send message success", count=10)
    example.finish()

    ids = [MESSAGE_ID.search(line).group(1) for line in sent]  # type: ignore[union-attr]
    for band in range(5):
        sent_here = {ids[p] for p in range(10) if min(p, 4) == band}
        topic = naming.priority_topic("priority-topic", band)
        records = records_with_ids(example_topic, topic, sent_here)
        priorities = {int(dict(r.headers())[prop.PRIORITY]) for r in records}
        assert priorities == {p for p in range(10) if min(p, 4) == band}
        assert {r.value() for r in records} == {b"hello, rocketmq."}


def test_the_lite_producer_example_sends_each_lite_topic_to_its_queue(
    example_topic: str, admin: AdminClient, tmp_path
) -> None:
    ensure_topic(admin, "parent-topic")
    example = Example("lite_producer_example.py", example_topic, tmp_path)
    sent = example.printed("send message success", count=10)
    example.finish()

    ids = {MESSAGE_ID.search(line).group(1) for line in sent}  # type: ignore[union-attr]
    records = records_with_ids(example_topic, "parent-topic", ids)
    assert {dict(r.headers())[prop.LITE_TOPIC]: r.partition() for r in records} == {
        f"lite-test-{n}".encode(): queue_for_sharding_key(f"lite-test-{n}", 4) for n in range(10)
    }


def test_the_lite_push_consumer_example_receives_only_its_lite_topics(
    example_topic: str, make_v5_producer, tmp_path
) -> None:
    from adapter.v5 import Message

    example = Example("lite_push_consumer_example.py", example_topic, tmp_path)
    example.printed("Please Enter to Stop the Application.")  # subscribed by then
    producer = make_v5_producer(TOPIC)
    for lite_topic in ("lite-test-3", "lite-test-42", "lite-test-7"):
        message = Message()
        message.topic, message.lite_topic, message.body = TOPIC, lite_topic, b"hello, lite."
        producer.send(message)
    example.printed("lite_topic:lite-test-3")
    example.printed("lite_topic:lite-test-7")
    time.sleep(1)
    example.press_enter()
    output = example.finish()  # upstream's example leaves without shutdown(): the process must end

    assert "lite-test-42" not in output
