"""Check-backs reach a live client of the topic: here one that announced a topic declared
TRANSACTION and never sent through this proxy, asked about a half message its producer
(another process, gone) left undecided, as RocketMQ asks any producer of the group."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from adapter import naming
from adapter.client import Message, TransactionMQProducer, TransactionStatus
from tests.integration.proxy.conftest import StartProxy
from tests.integration.proxy.reads import records_with_ids
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def test_a_client_that_only_listens_answers_the_check_of_a_dead_producer_s_message(
    start_proxy: StartProxy, new_topic, start_coordinator, system_topics: str
) -> None:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        Producer,
        TransactionChecker,
        TransactionResolution,
    )

    topic = new_topic(partitions=1, prefix="Orphans")
    proxy = start_proxy("--topic-types", f"{topic}=TRANSACTION")
    asked: list[str] = []
    answered = threading.Event()

    class Checker(TransactionChecker):  # type: ignore[misc]
        def check(self, message: Any) -> int:
            asked.append(message.message_id)
            answered.set()
            return TransactionResolution.COMMIT

    listener = Producer(ClientConfiguration(proxy.endpoint, Credentials()), (topic,), Checker())
    listener.startup()
    try:
        wait_until(lambda: "transactional producer of" in proxy.output(), timeout=30)
        gone = TransactionMQProducer(topic, lambda _: TransactionStatus.UNKNOWN)
        gone.set_name_server_address(system_topics)
        gone.start()
        message = Message(topic)
        message.set_body(b"left undecided")
        sent = gone.send_message_in_transaction(message, lambda *_: TransactionStatus.UNKNOWN)
        gone.shutdown()  # its process is gone: the check goes to the topic's other producers
        start_coordinator(transaction_timeout_ms=1500, check_interval_ms=3000)
        assert answered.wait(60), proxy.output()[-3000:]
        [record] = records_with_ids(system_topics, naming.kafka_topic(topic), {sent.msg_id})
    finally:
        listener.shutdown()
    assert asked[0] == sent.msg_id
    assert record.value() == b"left undecided"
