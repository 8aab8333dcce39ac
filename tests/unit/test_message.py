from __future__ import annotations

import re

import pytest

from adapter.client import Message, MessageProperty, ReceivedMessage
from adapter.exceptions import InvalidMessageError

pytestmark = pytest.mark.timeout(30)


def test_a_message_becomes_a_body_and_headers() -> None:
    m = Message("TopicTest")
    m.set_tags("TagA")
    m.set_keys("k1 k2")
    m.set_body("héllo")
    m.set_property("color", "blue")
    assert m.body == "héllo".encode()
    assert m.headers("ID1") == [
        ("UNIQ_KEY", b"ID1"),
        ("TAGS", b"TagA"),
        ("KEYS", b"k1 k2"),
        ("color", b"blue"),
    ]


def test_a_list_of_keys_is_joined_with_spaces() -> None:
    m = Message("T")
    m.set_keys(["a", "b"])
    assert m.keys == b"a b"


@pytest.mark.parametrize(
    "name",
    [
        "UNIQ_KEY",
        "WAIT",  # RocketMQ's MessageConst.STRING_HASH_SET, as putUserProperty refuses them
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TTL",
        "__BORNHOST",
        "__CRC32#",
        "__SHARDINGKEY",  # the FIFO group of 5.x, and the legacy delivery time
        "__STARTDELIVERTIME",
    ],
)
def test_system_property_names_are_reserved(name: str) -> None:
    message = Message("T")
    with pytest.raises(InvalidMessageError, match=f"Property<{re.escape(name)}> is used by system"):
        message.set_property(name, "x")
    assert message.properties == {}


@pytest.mark.parametrize("name", ["", " ", "\t", b""])
def test_a_blank_property_name_is_refused(name: str | bytes) -> None:
    with pytest.raises(InvalidMessageError, match="blank"):
        Message("T").set_property(name, "x")


def test_a_user_may_set_the_check_immunity_of_a_transactional_message() -> None:
    message = Message("T")
    message.set_property("CHECK_IMMUNITY_TIME_IN_SECONDS", "60")
    message.set_property("region", "")
    assert message.properties == {"CHECK_IMMUNITY_TIME_IN_SECONDS": b"60", "region": b""}


def test_a_delay_level_must_be_an_int() -> None:
    with pytest.raises(InvalidMessageError, match="int"):
        Message("T").set_delay_time_level("3")  # type: ignore[arg-type]


def received(topic: str = "TopicTest", **headers: bytes) -> ReceivedMessage:
    return ReceivedMessage(
        topic=topic,
        kafka_topic=topic,
        body=b"b",
        queue_id=2,
        queue_offset=7,
        timestamp=1700000000000,
        append_time=False,
        headers=list(headers.items()),
    )


def test_a_received_message_returns_bytes_where_the_original_does() -> None:
    r = received(TAGS=b"TagA", KEYS=b"k", UNIQ_KEY=b"ABC", DELAY=b"3", RECONSUME_TIME=b"2")
    assert (r.tags, r.keys, r.body) == (b"TagA", b"k", b"b")
    assert (r.topic, r.id) == ("TopicTest", "ABC")
    assert (r.queue_id, r.queue_offset, r.delay_time_level, r.reconsume_times) == (2, 7, 3, 2)
    assert r.get_property(MessageProperty.TAGS) == b"TagA"
    assert r[b"KEYS"] == b"k"
    assert bytes(r) == b"b"
    assert str(r) == "b"


def test_a_record_written_without_the_adapter_still_has_an_id_and_empty_properties() -> None:
    r = received()
    assert r.id == "TopicTest-2@7"
    assert r.tags == b""
    assert r.get_property("x") == b""
    assert r.born_timestamp == r.store_timestamp == 1700000000000


def test_a_retried_message_shows_its_original_topic() -> None:
    r = received(RETRY_TOPIC=b"TopicTest")
    assert r.topic == "TopicTest"


def test_a_retry_topic_header_renames_only_a_message_read_from_a_retry_topic() -> None:
    assert received(RETRY_TOPIC=b"Forged").topic == "TopicTest"
    assert received("%RETRY%GID_x", RETRY_TOPIC=b"TopicTest").topic == "TopicTest"


def test_properties_that_are_not_utf8_keep_their_bytes_as_escapes_instead_of_failing() -> None:
    message = received(UNIQ_KEY=b"AB\xff")
    assert message.id == "AB\\xff"
    assert message.id.encode() == b"AB\\xff", "an id a retry can carry"


def test_a_negative_or_garbled_reconsume_count_reads_as_zero() -> None:
    assert received(RECONSUME_TIME=b"-3").reconsume_times == 0
    assert received(RECONSUME_TIME=b"\xff").reconsume_times == 0


def test_a_message_keeps_the_uniq_key_it_was_given_at_its_first_send() -> None:
    message, other = Message("T"), Message("T")
    first = message.unique_key()
    assert re.fullmatch(r"[0-9A-F]{32}", first)
    assert message.unique_key() == first, "sent again, the same message id (RocketMQ's rule)"
    assert other.unique_key() != first
