"""The 5.x Producer's rules that need no Kafka: construction, state, and refusals."""

from __future__ import annotations

import os

import pytest

from adapter.v5 import ClientConfiguration, Credentials, Message, Producer, TransactionResolution
from adapter.v5.exception import IllegalArgumentException, IllegalStateException

pytestmark = pytest.mark.timeout(30)

CONFIG = ClientConfiguration("127.0.0.1:1", Credentials())


class Commit:
    def check(self, message: Message) -> TransactionResolution:
        return TransactionResolution.COMMIT


def order() -> Message:
    message = Message()
    message.topic = "Orders"
    message.body = b"order 42"
    return message


def test_a_producer_needs_a_configuration() -> None:
    with pytest.raises(IllegalArgumentException, match="clientConfiguration"):
        Producer(None)  # type: ignore[arg-type]


def test_a_checker_must_have_a_check_method() -> None:
    with pytest.raises(IllegalArgumentException, match="check"):
        Producer(CONFIG, checker=lambda message: 1)  # type: ignore[arg-type]


def test_invalid_topics_are_left_out_and_duplicates_kept_once() -> None:
    producer = Producer(CONFIG, ("Orders", "bad topic", "Orders", "RMQ_SYS_TRANS_HALF_TOPIC"))
    assert producer.topics == {"Orders"}


def test_a_new_producer_is_not_running_and_has_a_5x_client_id() -> None:
    producer = Producer(CONFIG, checker=Commit())
    assert not producer.is_running
    host, pid, index, stamp = producer.client_id.split("@")
    assert host
    assert pid == str(os.getpid())
    assert index.isdigit()
    assert stamp.isalnum()
    assert str(producer) == f"PRODUCER client_id:{producer.client_id}"
    assert producer.client_configuration is CONFIG


def test_nothing_is_sent_before_startup() -> None:
    producer = Producer(CONFIG, checker=Commit())
    with pytest.raises(IllegalStateException, match="not running"):
        producer.send(order())
    with pytest.raises(IllegalStateException, match="not running"):
        producer.send_async(order())
    with pytest.raises(IllegalStateException, match="not running"):
        producer.begin_transaction()


def test_shutting_down_a_producer_that_never_started_changes_nothing() -> None:
    producer = Producer(CONFIG)
    producer.shutdown()
    assert not producer.is_running
