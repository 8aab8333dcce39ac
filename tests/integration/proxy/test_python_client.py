"""The official RocketMQ 5.x Python client (``rocketmq-python-client``, pinned, unchanged)
runs upstream's producer examples against the proxy, with only its endpoint changed.

The examples are the ones ``adapter.v5`` runs (``tests/integration/v5/examples``, ported from
apache/rocketmq-clients ``python/example/``); here their import is put back to upstream's
(``from rocketmq import ...``) and their endpoint is the proxy's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from adapter import naming
from adapter import properties as prop
from adapter.producer.routing import queue_for_sharding_key
from tests.brokers import ROOT
from tests.integration.proxy.conftest import RunningProxy
from tests.integration.proxy.reads import records_with_ids
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

EXAMPLES = ROOT / "tests" / "integration" / "v5" / "examples"
ENDPOINTS = 'endpoints = "foobar.com:8080"'
OURS = re.compile(r"^from adapter\.v5(\.message_listener)? import", re.MULTILINE)
MESSAGE_ID = re.compile(r"message_id:\s?([0-9A-F]{32,34})")


class Example:
    """Upstream's example, run as a script against ``endpoint``; its output is kept."""

    def __init__(self, name: str, endpoint: str, tmp_path: Path) -> None:
        source = (EXAMPLES / name).read_text()
        assert source.count(ENDPOINTS) == 1, f"{name} sets its endpoints once"
        source = OURS.sub(lambda m: "from rocketmq import", source)
        script = tmp_path / name
        script.write_text(source.replace(ENDPOINTS, f'endpoints = "{endpoint}"'))
        self.process = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "HOME": str(tmp_path)},
        )
        self.lines: list[str] = []
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def printed(self, text: str, count: int = 1, timeout: float = 60) -> list[str]:
        """The pieces of output that begin with ``text``, once there are ``count``: counted
        in the whole output, as the client's callback threads print over each other's lines."""

        def found() -> list[str]:
            pieces = ["".join(self.lines).split(text)[1:]][0]
            if len(pieces) < count and self.process.poll() is not None:
                self._drainer.join(5)
                raise AssertionError(f"the example ended early:\n{''.join(self.lines)}")
            return [text + piece for piece in pieces] if len(pieces) >= count else []

        try:
            return wait_until(found, timeout=timeout, what=f"{count} x {text!r}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the example printed:\n{''.join(self.lines)}") from None

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


def ensure_topic(bootstrap: str, topic: str, partitions: int = 4) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - only "already exists" is fine
            if "already exists" not in str(exc):
                raise


def ids_in(lines: list[str]) -> set[str]:
    return {MESSAGE_ID.search(line).group(1) for line in lines}  # type: ignore[union-attr]


def test_the_normal_producer_example_sends_its_message(
    proxy: RunningProxy, system_topics: str, tmp_path: Path
) -> None:
    ensure_topic(system_topics, "topic")
    example = Example("normal_producer_example.py", proxy.endpoint, tmp_path)
    sent = example.printed("send message success")
    example.finish()

    [record] = records_with_ids(system_topics, "topic", ids_in(sent))
    headers = dict(record.headers())
    assert record.value() == b"hello, rocketmq."
    assert headers[prop.TAGS] == b"rocketmq-send-message"
    assert headers[prop.KEYS] == b"send_sync"
    assert headers["send"] == b"sync"


def test_the_async_producer_example_sends_its_ten_messages(
    proxy: RunningProxy, system_topics: str, tmp_path: Path
) -> None:
    ensure_topic(system_topics, "topic")
    example = Example("async_producer_example.py", proxy.endpoint, tmp_path)
    sent = example.printed("send message success", count=10)
    example.press_enter()
    example.finish()

    assert len(ids_in(sent)) == 10
    records = records_with_ids(system_topics, "topic", ids_in(sent))
    assert len(records) == 10
    assert {dict(r.headers())["send"] for r in records} == {b"async"}


def test_the_fifo_producer_example_sends_its_message_in_its_group_s_queue(
    proxy: RunningProxy, system_topics: str, tmp_path: Path
) -> None:
    ensure_topic(system_topics, "fifo-topic")
    example = Example("fifo_producer_example.py", proxy.endpoint, tmp_path)
    sent = example.printed("send message success")
    example.finish()

    [record] = records_with_ids(system_topics, "fifo-topic", ids_in(sent))
    assert dict(record.headers())[prop.SHARDING_KEY] == b"your-message-group0"
    assert record.partition() == queue_for_sharding_key("your-message-group0", 4)


def test_the_delay_producer_example_s_message_arrives_ten_seconds_later_not_before(
    proxy: RunningProxy, system_topics: str, start_forwarder, tmp_path: Path
) -> None:
    ensure_topic(system_topics, "delay-topic")
    start_forwarder()
    example = Example("delay_producer_example.py", proxy.endpoint, tmp_path)
    sent = example.printed("send message success")
    sent_at = time.time() * 1000
    example.finish()

    [record] = records_with_ids(system_topics, "delay-topic", ids_in(sent), timeout=60)
    deliver_at = int(dict(record.headers())[prop.TIMER_DELIVER_MS])
    assert 8_000 <= deliver_at - sent_at <= 10_500, "ten seconds from the example's send"
    assert record.timestamp()[1] >= deliver_at, "not before"


def test_the_transaction_producer_example_is_committed_by_its_checker_through_the_proxy(
    proxy: RunningProxy, system_topics: str, start_coordinator, tmp_path: Path
) -> None:
    ensure_topic(system_topics, "topic")
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=3000)
    example = Example("transaction_producer_example.py", proxy.endpoint, tmp_path)
    sent = example.printed("send message: ")
    [message_id] = ids_in(sent)
    example.printed(f"do TestChecker check, topic:topic, message_id: {message_id}")
    [record] = records_with_ids(system_topics, "topic", {message_id})
    example.press_enter()
    example.finish()

    headers = dict(record.headers())
    assert record.value() == b"hello, rocketmq."
    assert headers[prop.TAGS] == b"rocketmq-send-transaction-message"
    assert int(headers[prop.TRANSACTION_CHECK_TIMES]) >= 1
    assert headers[prop.PRODUCER_GROUP] == b"topic", "the topic is the producer group"


def test_the_priority_producer_example_sends_each_priority_to_its_band(
    proxy: RunningProxy, system_topics: str, tmp_path: Path
) -> None:
    """Its topic is made for priorities 0-4 here: 5-9 go to the highest band, 4."""
    bands = [naming.priority_topic("priority-topic", band) for band in range(5)]
    for band_topic in bands:
        ensure_topic(system_topics, band_topic)
    admin = AdminClient({"bootstrap.servers": system_topics})
    wait_until(lambda: set(bands) <= set(admin.list_topics(timeout=10).topics), what="the bands")
    example = Example("priority_producer_example.py", proxy.endpoint, tmp_path)
    sent = example.printed("send message success", count=10)
    example.finish()

    ids = [MESSAGE_ID.search(line).group(1) for line in sent]  # type: ignore[union-attr]
    for band, band_topic in enumerate(bands):
        priorities = {p for p in range(10) if min(p, 4) == band}
        records = records_with_ids(system_topics, band_topic, {ids[p] for p in priorities})
        assert {int(dict(r.headers())[prop.PRIORITY]) for r in records} == priorities
