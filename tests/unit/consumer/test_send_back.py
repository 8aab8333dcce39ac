"""The send-back's records: a failed message with any header bytes goes to the retry topic and
reads back the same, and a dead letter keeps its headers as bytes and says why it is there. No
Kafka: records are built as the consumer builds them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import properties as prop
from adapter.consumer.send_back import dead_letter_record
from adapter.message import ReceivedMessage
from adapter.property_bytes import restored
from adapter.schedule.envelope import delivered, sent_back

pytestmark = pytest.mark.timeout(60)

SPRING_OFFSET = "kafka_dlt-original-offset"


def received(headers: list[tuple[str, bytes]], topic: str = "Orders") -> ReceivedMessage:
    return ReceivedMessage(
        topic=topic,
        kafka_topic=topic,
        body=b"body",
        queue_id=1,
        queue_offset=7,
        timestamp=1_000,
        append_time=False,
        headers=headers,
    )


def back_from_the_retry_topic(message: ReceivedMessage) -> ReceivedMessage:
    """The copy the forwarder delivers to ``%RETRY%G``, as the consumer reads it there."""
    copy = delivered(sent_back(message, to_topic="%RETRY%G", level=3, max_reconsume_times=16))
    return ReceivedMessage(
        topic="%RETRY%G",
        kafka_topic=".25RETRY.25G",
        body=copy.value,
        queue_id=0,
        queue_offset=0,
        timestamp=2_000,
        append_time=False,
        headers=restored(copy.headers),
    )


def test_a_message_with_binary_headers_goes_to_the_retry_topic_and_reads_back_the_same() -> None:
    binary = [
        (prop.UNIQ_KEY, b"ID\xff1"),
        (prop.TAGS, b"Tag\xfe"),
        (prop.KEYS, b"k\x80"),
        (SPRING_OFFSET, b"\x00\x00\x00\x00\x00\x00\x01\xc8"),
        ("color", b"red"),
    ]
    first = received(binary)

    again = back_from_the_retry_topic(first)

    assert again.reconsume_times == 1
    assert (again.topic, again.id) == ("Orders", first.id)
    for name, value in binary:
        assert again.get_property(name) == value, name


@given(
    headers=st.lists(
        st.tuples(
            st.one_of(st.text(max_size=12), st.sampled_from(["rmq.bytes.x", "rmq.bytes.", "TAGS"])),
            st.binary(max_size=16),
        ),
        max_size=6,
    )
)
def test_any_user_property_survives_the_retry_topic_byte_for_byte(
    headers: list[tuple[str, bytes]],
) -> None:
    first = received(headers)
    again = back_from_the_retry_topic(first)
    system = prop.RESERVED | {prop.DELAY}
    for name, value in first.properties.items():
        if name not in system:
            assert again.get_property(name) == value, name


def test_a_dead_letter_keeps_binary_headers_as_bytes_and_records_why() -> None:
    message = received([(prop.UNIQ_KEY, b"ID1"), (SPRING_OFFSET, b"\x00\xff"), ("TAGS", b"\xff")])

    record = dead_letter_record(message, "%DLQ%G", max_reconsume_times=16, reason="why not")

    headers = dict(record.headers)
    assert record.topic == "%DLQ%G"
    assert record.value == b"body"
    assert headers[SPRING_OFFSET] == b"\x00\xff"
    assert headers[prop.TAGS] == b"\xff"
    assert headers[prop.UNIQ_KEY] == b"ID1"
    assert headers[prop.RETRY_TOPIC] == b"Orders"
    assert headers[prop.RECONSUME_TIME] == b"1"
    assert headers["rmq.dlq_reason"] == b"why not"
    assert not any(name.startswith("rmq.bytes.") for name in headers)
    assert prop.REAL_TOPIC not in headers
