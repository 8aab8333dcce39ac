"""The documentation's examples run as they stand (the address, the database file and the topic
are the test's own): a transactional payment with a checker, and a consumer made idempotent with
the message id, both in docs/clients.md (the README links to them)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from adapter.client import ConsumeStatus, Message, Producer
from tests.brokers import ROOT
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

EXAMPLES = ROOT / "docs" / "clients.md"


def example(title: str, bootstrap: str, database: Path, topic: str) -> str:
    """The ``# example: <title>`` block of docs/clients.md, pointed at the test's Kafka, file
    and topic."""
    blocks = re.findall(r"```python\n(# example: (.*?)\n.*?)```", EXAMPLES.read_text(), re.S)
    [code] = [code for code, name in blocks if name == title]
    return (
        code.replace('"127.0.0.1:9092"', repr(bootstrap))
        .replace('"shop.db"', repr(str(database)))
        .replace('"Orders"', repr(topic))
    )


def run(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "example"}
    exec(compile(code, str(EXAMPLES), "exec"), namespace)  # noqa: S102 - the docs' own code
    return namespace


def test_the_transactional_payment_commits_once_and_a_second_payment_is_rolled_back(
    system_topics: str, new_topic, tmp_path: Path
) -> None:
    from tests.support import read_committed

    topic = new_topic()
    code = example("a transactional payment with a checker", system_topics, tmp_path / "db", topic)
    first = run(code)
    assert first["result"].status.name == "OK"
    second = run(code)  # the same order again: the database refuses it
    assert second["result"].status.name == "OK"
    [record] = read_committed(system_topics, topic, 1)
    assert record.value() == b'{"order": 42, "amount": "30.00"}'
    rows = sqlite3.connect(tmp_path / "db").execute("select order_id from payments").fetchall()
    assert rows == [("order-42",)]


def test_the_idempotent_consumer_handles_a_message_sent_twice_with_one_id_once(
    system_topics: str, new_topic, tmp_path: Path
) -> None:
    topic = new_topic()
    producer = Producer(unique("PID"))
    producer.set_name_server_address(system_topics)
    producer.start()
    message = Message(topic)
    message.set_body("ship order 7")
    producer.send_sync(message)
    producer.send_sync(message)  # a redelivery, as after a rebalance: the same msg_id
    producer.shutdown()

    code = example("an idempotent consumer", system_topics, tmp_path / "db", topic)
    setup, start = code.split("\nconsumer = PushConsumer(", 1)
    namespace = run(setup)
    handled: list[str] = []
    original = namespace["on_message"]

    def on_message(msg: Any) -> ConsumeStatus:
        handled.append(msg.id)
        return original(msg)

    namespace["on_message"] = on_message  # counts deliveries, then runs the example's callback
    exec(compile("consumer = PushConsumer(" + start, str(EXAMPLES), "exec"), namespace)  # noqa: S102
    try:
        wait_until(lambda: len(handled) == 2, timeout=60, what="both deliveries")
    finally:
        namespace["consumer"].shutdown()
    assert handled[0] == handled[1], "one message id"
    db = sqlite3.connect(tmp_path / "db")
    assert db.execute("select body from shipped").fetchall() == [(b"ship order 7",)]
