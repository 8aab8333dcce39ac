"""RocketMQ's batch rules, checked before anything is sent (no Kafka needed)."""

from __future__ import annotations

import pytest

from adapter import properties as prop
from adapter.exceptions import InvalidMessageError, MessageTooLargeError
from adapter.message import Message
from adapter.producer.batch import check_batch, encoded_size

pytestmark = pytest.mark.timeout(10)

LIMIT = 4 * 1024 * 1024


def message(topic: str = "Orders", body: bytes = b"body") -> Message:
    msg = Message(topic)
    msg.set_body(body)
    return msg


def test_a_batch_of_one_topic_is_accepted_and_names_its_topic() -> None:
    assert check_batch([message(), message(), message()], LIMIT) == "Orders"


def test_an_empty_batch_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="no messages"):
        check_batch([], LIMIT)


def test_a_batch_of_two_topics_is_refused_as_rocketmq_refuses_it() -> None:
    with pytest.raises(InvalidMessageError, match="should be the same"):
        check_batch([message("Orders"), message("Payments")], LIMIT)


def test_a_delayed_message_is_refused_in_a_batch() -> None:
    delayed = message()
    delayed.set_delay_time_level(3)
    with pytest.raises(InvalidMessageError, match="TimeDelayLevel is not supported"):
        check_batch([message(), delayed], LIMIT)


@pytest.mark.parametrize("name", prop.DELIVERY_TIME)
def test_a_message_with_a_delivery_time_is_refused_in_a_batch(name: str) -> None:
    timed = message()
    timed.put_property(name, "1700000000000")
    with pytest.raises(InvalidMessageError, match="delivery time"):
        check_batch([timed], LIMIT)


def test_a_transactional_message_is_refused_in_a_batch() -> None:
    half = message()
    half.put_property(prop.TRANSACTION_PREPARED, "true")
    with pytest.raises(InvalidMessageError, match="transactional"):
        check_batch([message(), half], LIMIT)


def test_a_batch_for_a_retry_topic_is_refused() -> None:
    with pytest.raises(InvalidMessageError, match="Retry Group is not supported"):
        check_batch([message("%RETRY%GID_orders")], LIMIT)


def test_a_batch_whose_encoded_size_passes_the_limit_is_refused_though_each_body_fits() -> None:
    messages = [message(body=b"x" * 400) for _ in range(3)]
    total = sum(encoded_size(m, m.unique_key()) for m in messages)
    assert check_batch(messages, total) == "Orders"
    with pytest.raises(MessageTooLargeError, match=f"MAX: {total - 1}"):
        check_batch(messages, total - 1)


def test_the_encoded_size_counts_body_properties_and_rocketmq_s_fixed_fields() -> None:
    msg = message(body=b"12345")
    msg.set_tags("TagA")
    msg_id = msg.unique_key()
    properties = len("UNIQ_KEY") + len(msg_id) + 2 + len("TAGS") + len("TagA") + 2
    assert encoded_size(msg, msg_id) == 20 + 5 + 2 + properties


def test_each_message_keeps_its_uniq_key_across_a_refused_and_a_retried_check() -> None:
    messages = [message(), message()]
    with pytest.raises(MessageTooLargeError):
        check_batch(messages, 10)
    ids = [m.unique_key() for m in messages]
    check_batch(messages, LIMIT)
    assert [m.unique_key() for m in messages] == ids
