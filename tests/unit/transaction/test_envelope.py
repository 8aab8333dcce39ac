"""The pure envelopes of transactional messages: half message, commit, check request, what the
callbacks see."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import AdapterError, InvalidMessageError
from adapter.message import Message
from adapter.transaction.envelope import (
    check_request,
    checked_message,
    committed_delivery,
    half_message,
    prepared_message,
    refuse_delay,
)
from adapter.transaction.half import half_info
from adapter.wire import codec
from adapter.wire.records import CheckRequest, HalfMessage

TID = "7F0000010001B4AAC2C11C44A3F90000"


def order(body: bytes = b"order 42", /, **props: str) -> Message:
    message = Message("Orders")
    message.set_body(body)
    message.set_tags("TagA")
    message.set_keys(["k1", "k2"])
    for name, value in props.items():
        message.set_property(name, value)
    return message


def half_of(message: Message) -> HalfMessage:
    return half_message(message, group="GID_tx", transaction_id=TID, born_ms=1_000)


def test_a_half_message_is_marked_prepared_and_names_its_producer_group() -> None:
    half = half_of(order(region="eu"))
    assert (half.transaction_id, half.producer_group, half.topic) == (TID, "GID_tx", "Orders")
    assert (half.queue_id, half.tags, half.keys) == (-1, "TagA", "k1 k2")
    assert (half.body, half.born_timestamp) == (b"order 42", 1_000)
    assert half.properties == {"region": "eu", "TRAN_MSG": "true", "PGROUP": "GID_tx"}


def test_a_half_message_without_tags_or_keys_has_none() -> None:
    message = Message("Orders")
    message.set_body("x")
    half = half_of(message)
    assert (half.tags, half.keys) == (None, None)
    assert prop.TAGS not in dict(committed_delivery(half, check_times=0).headers)


def test_a_property_that_is_not_utf8_is_refused() -> None:
    message = order()
    message.set_property("blob", b"\xff\xfe")
    with pytest.raises(InvalidMessageError, match="'blob' is not UTF-8"):
        half_of(message)


def test_tags_that_are_not_utf8_are_refused() -> None:
    message = order()
    message.set_tags(b"\xc3")
    with pytest.raises(InvalidMessageError, match="TAGS"):
        half_of(message)


def test_a_message_with_a_delay_level_cannot_be_transactional() -> None:
    message = order()
    message.set_delay_time_level(3)
    with pytest.raises(InvalidMessageError, match="transactional message cannot be delayed"):
        half_of(message)


@pytest.mark.parametrize("name", prop.DELIVERY_TIME)
def test_a_message_with_a_delivery_time_cannot_be_transactional(name: str) -> None:
    message = order()
    message.put_property(name, "60000")  # set_property refuses these names to applications
    with pytest.raises(InvalidMessageError, match=f"cannot be delayed.*{name}"):
        refuse_delay(message)


@pytest.mark.parametrize("level", [0, -1])
def test_a_delay_level_of_zero_or_less_is_no_delay(level: int) -> None:
    message = order()
    message.set_delay_time_level(level)
    refuse_delay(message)  # no delay: not refused
    assert prop.DELAY not in half_of(message).properties
    message.set_delay_time_level(1)
    with pytest.raises(InvalidMessageError, match="delay level 1"):
        refuse_delay(message)


def test_a_commit_restores_the_message_without_its_prepared_marks() -> None:
    half = HalfMessage(
        transaction_id=TID,
        producer_group="GID_tx",
        topic="Orders",
        queue_id=2,
        tags="TagA",
        keys="k1",
        properties={
            "region": "eu",
            "TRAN_MSG": "true",
            "PGROUP": "GID_tx",
            "REAL_TOPIC": "Orders",
            "REAL_QID": "2",
            "CHECK_IMMUNITY_TIME_IN_SECONDS": "60",
        },
        body=b"\x00body",
        born_timestamp=1_000,
    )
    delivery = committed_delivery(half, check_times=0)
    headers = dict(delivery.headers)
    assert (delivery.topic, delivery.queue_id, delivery.key, delivery.value) == (
        "Orders",
        2,
        None,
        b"\x00body",
    )
    assert headers == {
        "UNIQ_KEY": TID.encode(),
        "TAGS": b"TagA",
        "KEYS": b"k1",
        "region": b"eu",
        "CHECK_IMMUNITY_TIME_IN_SECONDS": b"60",
        "__transactionId__": TID.encode(),
        "PGROUP": b"GID_tx",
        "BORN_TIMESTAMP": b"1000",
    }
    assert len(delivery.headers) == len(headers), "no property twice"


def test_a_commit_through_a_check_says_how_many_checks_it_took() -> None:
    headers = dict(committed_delivery(half_of(order()), check_times=3).headers)
    assert headers[prop.TRANSACTION_CHECK_TIMES] == b"3"


def test_a_born_timestamp_property_is_kept_rather_than_overwritten() -> None:
    half = half_of(order())
    half.properties[prop.BORN_TIMESTAMP] = "555"
    headers = committed_delivery(half, check_times=0).headers
    assert [v for k, v in headers if k == prop.BORN_TIMESTAMP] == [b"555"]


def test_what_the_local_transaction_sees_is_the_stored_half_message() -> None:
    half = half_of(order(region="eu"))
    msg = prepared_message(half, half_partition=5, half_offset=17)
    assert (msg.topic, msg.id, msg.body) == ("Orders", TID, b"order 42")
    assert (msg.tags, msg.keys) == (b"TagA", b"k1 k2")
    assert (msg.queue_id, msg.queue_offset, msg.born_timestamp) == (5, 17, 1_000)
    assert msg.get_property(prop.TRANSACTION_ID) == TID.encode()
    assert msg.get_property(prop.PRODUCER_GROUP) == b"GID_tx"
    assert msg.get_property(prop.TRANSACTION_PREPARED) == b"true"
    assert msg.get_property("region") == b"eu"
    assert msg.get_property(prop.TRANSACTION_CHECK_TIMES) == b""
    assert msg.delay_time_level == 0


def test_a_check_request_carries_the_half_message_and_where_it_is() -> None:
    half = half_of(order(region="eu"))
    request = check_request(half, half_partition=3, half_offset=9, check_times=2, now_ms=7_000)
    assert (request.transaction_id, request.producer_group) == (TID, "GID_tx")
    assert (request.half_partition, request.half_offset, request.check_times) == (3, 9, 2)
    assert (request.topic, request.queue_id, request.tags, request.keys) == (
        "Orders",
        -1,
        "TagA",
        "k1 k2",
    )
    assert (request.body, request.born_timestamp, request.requested_at) == (
        b"order 42",
        1_000,
        7_000,
    )
    assert request.properties == half.properties
    assert request.properties is not half.properties


def test_what_the_checker_sees_says_which_check_it_is() -> None:
    half = half_of(order(region="eu"))
    request = check_request(half, half_partition=3, half_offset=9, check_times=2, now_ms=7_000)
    # Through the wire format, as the producer reads it from the check topic.
    msg = checked_message(codec.decode_as(CheckRequest, codec.encode(request)))
    assert (msg.topic, msg.id, msg.body, msg.tags, msg.keys) == (
        "Orders",
        TID,
        b"order 42",
        b"TagA",
        b"k1 k2",
    )
    assert msg.get_property(prop.TRANSACTION_CHECK_TIMES) == b"2"
    assert msg.get_property(prop.TRANSACTION_ID) == TID.encode()
    assert msg.get_property(prop.UNIQ_KEY) == TID.encode()
    assert msg.get_property(prop.PRODUCER_GROUP) == b"GID_tx"
    assert msg.get_property("region") == b"eu"
    assert (msg.queue_id, msg.queue_offset) == (3, 9)
    assert (msg.born_timestamp, msg.store_timestamp) == (1_000, 7_000)
    assert msg.kafka_topic == ".25CHECK.25GID_tx"


_names = st.text(st.characters(categories=["L", "N"], include_characters="_-."), min_size=1).filter(
    lambda n: n not in prop.NOT_FOR_USERS
)


@given(
    properties=st.dictionaries(_names, st.text(), max_size=8),
    check_times=st.integers(min_value=0, max_value=15),
    body=st.binary(min_size=1),
)
def test_every_user_property_survives_a_commit_exactly_once(
    properties: dict[str, str], check_times: int, body: bytes
) -> None:
    half = half_of(order(body, **properties))
    headers = committed_delivery(half, check_times=check_times).headers
    names = [name for name, _ in headers]
    assert len(names) == len(set(names))
    restored = dict(headers)
    for name, value in properties.items():
        assert restored[name] == value.encode()
    assert prop.TRANSACTION_PREPARED not in restored
    assert (prop.TRANSACTION_CHECK_TIMES in restored) == (check_times > 0)
    assert restored[prop.UNIQ_KEY] == restored[prop.TRANSACTION_ID] == TID.encode()


_topics = st.from_regex(r"[a-zA-Z0-9_%|-]{1,40}", fullmatch=True)


@given(
    topic=_topics,
    group=st.from_regex(r"[a-zA-Z0-9_%|-]{1,40}", fullmatch=True),
    immunity=st.one_of(st.none(), st.text(max_size=6)),
    born_ms=st.integers(min_value=0, max_value=2**41),
)
def test_a_half_message_the_producer_would_send_is_one_the_coordinator_accepts(
    topic: str, group: str, immunity: str | None, born_ms: int
) -> None:
    message = Message(topic)
    message.set_body(b"x")
    if immunity is not None:
        message.set_property(prop.CHECK_IMMUNITY_TIME_IN_SECONDS, immunity)
    try:
        naming.sendable_kafka_topic(topic)  # what the producer's send checks
        naming.validate_group(group)  # what the producer's start checks
        half = half_message(message, group=group, transaction_id=TID, born_ms=born_ms)
        half_info(half)  # what the producer checks before sending it
    except AdapterError:
        return  # refused at the producer, before anything is sent
    stored = codec.decode(codec.encode(half))
    assert isinstance(stored, HalfMessage)
    info = half_info(stored)  # the coordinator reading it: never refused
    assert (info.transaction_id, info.producer_group, info.born_ms) == (TID, group, born_ms)


def test_a_copy_stamp_names_the_send_on_the_half_message_and_is_never_delivered() -> None:
    message = order()
    half = half_of(message)
    stamped = dataclasses.replace(half, properties={**half.properties, prop.COPY_STAMP: "9000"})
    assert half_info(stamped).copy_key == (TID, "GID_tx", 9000)
    assert half_info(half).copy_key == (TID, "GID_tx", 1_000), "else the born time"
    headers = dict(committed_delivery(stamped, check_times=0).headers)
    assert prop.COPY_STAMP not in headers
