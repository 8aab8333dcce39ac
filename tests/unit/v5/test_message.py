"""The 5.x Message: its setters' rules, the checks before a send, and its form on the wire."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import naming
from adapter import properties as prop
from adapter.message import ReceivedMessage
from adapter.v5 import Message
from adapter.v5.delivery_time import SECONDS_BELOW
from adapter.v5.exception import IllegalArgumentException
from adapter.v5.message import MessageType

pytestmark = pytest.mark.timeout(30)

MAX = 4 * 1024 * 1024


def order(topic: str = "Orders", body: bytes = b"order 42") -> Message:
    message = Message()
    message.topic = topic
    message.body = body
    return message


def test_a_new_message_is_empty() -> None:
    message = Message()
    assert message.topic is None
    assert message.body is None
    assert message.tag is None
    assert message.keys == set()
    assert message.properties == {}
    assert message.message_group is None
    assert message.delivery_timestamp is None
    assert message.message_id is None


@pytest.mark.parametrize("topic", ["", "  ", "a|b", "a.b", "topic with spaces", "héllo"])
def test_a_topic_breaking_the_5x_pattern_is_refused(topic: str) -> None:
    with pytest.raises(IllegalArgumentException, match="topic"):
        Message().topic = topic


def test_a_topic_with_a_percent_sign_is_accepted() -> None:
    message = Message()
    message.topic = "%RETRY%like"
    assert message.topic == "%RETRY%like"


def test_an_empty_body_is_refused_and_text_must_be_encoded_first() -> None:
    with pytest.raises(IllegalArgumentException, match="body should not be blank"):
        Message().body = b""
    with pytest.raises(IllegalArgumentException, match="encode"):
        Message().body = "text"  # type: ignore[assignment]


def test_a_tag_must_not_be_blank_or_contain_a_bar() -> None:
    with pytest.raises(IllegalArgumentException, match="blank"):
        Message().tag = " "
    with pytest.raises(IllegalArgumentException, match='"\\|"'):
        Message().tag = "TagA|TagB"


def test_assigning_keys_adds_them_as_5x_does() -> None:
    message = Message()
    message.keys = "order-1"
    message.keys = "order-2"
    message.keys = ["order-3", "order-1"]
    assert message.keys == {"order-1", "order-2", "order-3"}
    with pytest.raises(IllegalArgumentException, match="key should not be blank"):
        message.keys = ""


def test_properties_must_not_be_blank() -> None:
    message = Message()
    message.add_property("color", "blue")
    assert message.properties == {"color": "blue"}
    with pytest.raises(IllegalArgumentException, match="value"):
        message.add_property("size", " ")


def test_message_group_and_delivery_timestamp_exclude_each_other() -> None:
    grouped = Message()
    grouped.message_group = "order-42"
    with pytest.raises(IllegalArgumentException, match="same time"):
        grouped.delivery_timestamp = 1_900_000_000
    timed = Message()
    timed.delivery_timestamp = 1_900_000_000
    with pytest.raises(IllegalArgumentException, match="same time"):
        timed.message_group = "order-42"


def test_a_normal_message_is_normal_and_a_grouped_one_fifo() -> None:
    assert order().type_for_send(transactional=False, max_body_size=MAX) is MessageType.NORMAL
    grouped = order()
    grouped.message_group = "g"
    assert grouped.type_for_send(transactional=False, max_body_size=MAX) is MessageType.FIFO
    assert order().type_for_send(transactional=True, max_body_size=MAX) is (MessageType.TRANSACTION)


def test_a_message_without_topic_or_body_is_refused_before_sending() -> None:
    no_topic = Message()
    no_topic.body = b"x"
    with pytest.raises(IllegalArgumentException, match="topic has not been set"):
        no_topic.type_for_send(transactional=False, max_body_size=MAX)
    no_body = Message()
    no_body.topic = "Orders"
    with pytest.raises(IllegalArgumentException, match="body is none"):
        no_body.type_for_send(transactional=False, max_body_size=MAX)


def test_a_body_over_the_limit_is_refused_with_the_limit_and_the_size() -> None:
    with pytest.raises(IllegalArgumentException, match="max size=4 bytes, got 5 bytes"):
        order(body=b"12345").type_for_send(transactional=False, max_body_size=4)


def test_a_message_with_a_delivery_timestamp_is_a_delay_message() -> None:
    timed = order()
    timed.delivery_timestamp = 1_900_000_000
    assert timed.type_for_send(transactional=False, max_body_size=MAX) is MessageType.DELAY


@pytest.mark.parametrize(
    ("given", "ms"),
    [
        (1_900_000_000, 1_900_000_000_000),  # seconds, as 5.x's example sends them
        (1_900_000_000.0001, 1_900_000_000_001),  # time.time() + 10: never early, so rounded up
        (1_900_000_000_123, 1_900_000_000_123),  # milliseconds
        (1_900_000_000_123.25, 1_900_000_000_124),  # time.time() * 1000 + 3000
    ],
)
def test_a_delivery_timestamp_becomes_whole_milliseconds_at_the_setter(
    given: float, ms: int
) -> None:
    timed = order()
    timed.delivery_timestamp = given
    assert timed.delivery_timestamp == ms
    assert type(timed.delivery_timestamp) is int


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (True, "not a bool"),
        (False, "not a bool"),
        (-1_900_000_000, "positive"),
        (0, "positive"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        ("1900000000", "a number"),
        (1_900_000_000_000_000, "microseconds or nanoseconds"),
        (1.9e18, "microseconds or nanoseconds"),
    ],
)
def test_a_delivery_timestamp_that_is_no_epoch_time_is_refused_at_the_setter(
    given: object, why: str
) -> None:
    timed = order()
    with pytest.raises(IllegalArgumentException, match=f"delivery_timestamp .*{why}"):
        timed.delivery_timestamp = given  # type: ignore[assignment]
    assert timed.delivery_timestamp is None, "nothing kept"


_NOW_S = 1_795_000_000
_IN_UNITS = st.sampled_from([1, 1000, 10**6, 10**9]).flatmap(  # s, ms, µs and ns near now
    lambda unit: st.floats(-86_400.0, 86_400.0).map(lambda ahead: (_NOW_S + ahead) * unit)
)


@given(
    value=st.one_of(
        st.integers(),
        st.floats(),
        st.booleans(),
        _IN_UNITS,
        _IN_UNITS.map(int),
        _IN_UNITS.map(lambda v: -v),
    )
)
def test_any_delivery_timestamp_becomes_whole_ms_never_earlier_or_is_refused(
    value: float,
) -> None:
    timed = order()
    try:
        timed.delivery_timestamp = value
    except IllegalArgumentException:
        assert isinstance(value, bool) or not math.isfinite(value) or not 0 < value < 10**14
        return
    ms = timed.delivery_timestamp
    assert type(ms) is int
    meant = value * 1000 if value < SECONDS_BELOW else value
    assert ms - 1 < meant <= ms, "whole milliseconds, rounded up: never early"


def test_a_transactional_message_may_not_have_a_group() -> None:
    grouped = order()
    grouped.message_group = "g"
    with pytest.raises(IllegalArgumentException, match="transactional message should not"):
        grouped.type_for_send(transactional=True, max_body_size=MAX)


@pytest.mark.parametrize(
    "name", ["UNIQ_KEY", "TAGS", "__SHARDINGKEY", "TIMER_DELIVER_MS", "WAIT", "__STARTDELIVERTIME"]
)
def test_a_property_named_like_a_system_one_is_refused(name: str) -> None:
    message = order()
    message.add_property(name, "x")
    with pytest.raises(IllegalArgumentException, match=f"{name}.*used by the system"):
        message.type_for_send(transactional=False, max_body_size=MAX)


@pytest.mark.parametrize("topic", ["RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX", "T" * 128])
def test_a_system_topic_or_a_too_long_name_is_refused(topic: str) -> None:
    with pytest.raises(IllegalArgumentException, match="forbidden|max length"):
        order(topic).type_for_send(transactional=False, max_body_size=MAX)


def test_on_the_wire_a_message_has_the_2_0_headers() -> None:
    message = order()
    message.tag = "Paid"
    message.keys = "order-42"
    message.keys = "alice"
    message.add_property("amount", "30")
    message.message_group = "order-42"
    wire = message.to_wire()
    assert wire.topic == "Orders"
    assert wire.body == b"order 42"
    assert wire.headers("MSGID") == [
        (prop.UNIQ_KEY, b"MSGID"),
        (prop.TAGS, b"Paid"),
        (prop.KEYS, b"order-42 alice"),
        ("amount", b"30"),
        (prop.SHARDING_KEY, b"order-42"),
    ]


def received_on(topic: str, headers: list[tuple[str, bytes]]) -> ReceivedMessage:
    """A consumed record of ``topic`` (a RocketMQ name), body ``order 42``."""
    return ReceivedMessage(
        topic=topic,
        kafka_topic=naming.kafka_topic(topic),
        body=b"order 42",
        queue_id=1,
        queue_offset=7,
        timestamp=1_700_000_000_000,
        append_time=False,
        headers=headers,
    )


def test_a_received_message_reads_back_as_the_5x_message_that_was_sent() -> None:
    received = received_on(
        "Orders",
        [
            (prop.UNIQ_KEY, b"MSGID"),
            (prop.TAGS, b"Paid"),
            (prop.KEYS, b"order-42 alice"),
            ("amount", b"30"),
            (prop.SHARDING_KEY, b"order-42"),
            (prop.TRANSACTION_PREPARED, b"true"),
            (prop.PRODUCER_GROUP, b"Orders"),
        ],
    )
    message = Message.from_received(received)
    assert message.topic == "Orders"
    assert message.body == b"order 42"
    assert message.message_id == "MSGID"
    assert message.tag == "Paid"
    assert message.keys == {"order-42", "alice"}
    assert message.message_group == "order-42"
    assert message.properties == {"amount": "30"}
    assert message.born_timestamp == 1_700_000_000_000


@pytest.mark.parametrize("other", ["message_group", "delivery_timestamp", "priority"])
def test_a_lite_topic_excludes_a_group_a_delivery_time_and_a_priority(other: str) -> None:
    value = {"message_group": "g", "delivery_timestamp": 1_900_000_000, "priority": 3}[other]
    lite = order()
    lite.lite_topic = "chat-1"
    with pytest.raises(IllegalArgumentException, match="same time"):
        setattr(lite, other, value)
    first = order()
    setattr(first, other, value)
    with pytest.raises(IllegalArgumentException, match="same time"):
        first.lite_topic = "chat-1"


def test_a_lite_topic_must_be_a_short_name_and_not_blank() -> None:
    with pytest.raises(IllegalArgumentException, match="not been set"):
        order().lite_topic = " "
    with pytest.raises(IllegalArgumentException, match="max length 64"):
        order().lite_topic = "x" * 65
    with pytest.raises(IllegalArgumentException, match="illegal characters"):
        order().lite_topic = "chat/1"


def test_a_lite_message_is_lite_keyed_by_its_lite_topic_and_reads_back_so() -> None:
    lite = order()
    lite.lite_topic = "chat-1"
    assert lite.type_for_send(transactional=False, max_body_size=MAX) is MessageType.LITE
    with pytest.raises(IllegalArgumentException, match="lite"):
        lite.type_for_send(transactional=True, max_body_size=MAX)
    wire = lite.to_wire()
    assert wire.properties[prop.LITE_TOPIC] in ("chat-1", b"chat-1")

    back = Message.from_received(received_on("Orders", [(prop.LITE_TOPIC, b"chat-1")]))
    assert back.lite_topic == "chat-1"
    assert back.properties == {}


def test_message_type_descriptions_are_those_of_5x() -> None:
    assert [Message.message_type_desc(n) for n in (1, 2, 3, 4, 9)] == [
        "NORMAL",
        "FIFO",
        "DELAY",
        "TRANSACTION",
        "MESSAGE_TYPE_UNSPECIFIED",
    ]


def test_a_message_goes_to_its_topic_in_a_namespace_and_comes_back_without_it() -> None:
    message = Message()
    message.topic, message.body = "Orders", b"x"
    assert message.to_wire("shop").topic == "shop%Orders"
    assert message.to_wire().topic == "Orders"
    back = Message.from_received(received_on("shop%Orders", [(prop.UNIQ_KEY, b"ID")]))
    assert (back.topic, back.namespace) == ("Orders", "shop")
