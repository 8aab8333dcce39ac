"""A message in and out of SCHEDULE_TOPIC_XXXX: restored on delivery, counted on send-back."""

from __future__ import annotations

from adapter import properties as prop
from adapter.message import Message, ReceivedMessage
from adapter.schedule.envelope import delivered, scheduled, sent_back


def test_a_delayed_message_is_restored_with_everything_but_its_delay() -> None:
    message = Message("Orders")
    message.set_body(b"\x00body")
    message.set_tags("TagA")
    message.set_keys(["k1", "k2"])
    message.set_property("region", "eu")
    message.set_delay_time_level(3)
    record = scheduled(message, level=3, unique_key="ID1", born_ms=123, queue_id=2, key=b"sk")

    out = delivered(record)
    headers = dict(out.headers)
    assert (out.topic, out.queue_id, out.key, out.value) == ("Orders", 2, b"sk", b"\x00body")
    assert headers[prop.UNIQ_KEY] == b"ID1"
    assert headers[prop.TAGS] == b"TagA"
    assert headers[prop.KEYS] == b"k1 k2"
    assert headers["region"] == b"eu"
    assert headers[prop.BORN_TIMESTAMP] == b"123"
    assert headers[prop.REAL_TOPIC] == b"Orders"
    assert headers[prop.REAL_QUEUE_ID] == b"2"
    assert prop.DELAY not in headers
    assert prop.RECONSUME_TIME not in headers


def received(**headers: bytes) -> ReceivedMessage:
    return ReceivedMessage(
        topic="%RETRY%G" if prop.RETRY_TOPIC in headers else "Orders",
        kafka_topic="Orders",
        body=b"body",
        queue_id=0,
        queue_offset=7,
        timestamp=1_000,
        append_time=False,
        headers=list(headers.items()),
    )


def test_a_send_back_counts_the_retry_and_remembers_where_the_message_came_from() -> None:
    first = received(UNIQ_KEY=b"ID1", TAGS=b"TagA", color=b"red", TRAN_MSG=b"true")
    copy = sent_back(first, to_topic="%RETRY%G", level=3, max_reconsume_times=16)
    assert (copy.topic, copy.level, copy.reconsume_times) == ("%RETRY%G", 3, 1)
    assert copy.unique_key == "ID1"
    assert copy.tags == "TagA"
    assert copy.properties[prop.RETRY_TOPIC] == "Orders"
    assert copy.properties[prop.ORIGIN_MESSAGE_ID] == "ID1"
    assert copy.properties[prop.MAX_RECONSUME_TIMES] == "16"
    assert copy.properties["color"] == "red"
    assert prop.TRANSACTION_PREPARED not in copy.properties

    # Delivered to the retry topic, it reads as the original topic with one retry counted.
    back = delivered(copy)
    again = ReceivedMessage(
        topic="%RETRY%G",
        kafka_topic=".25RETRY.25G",
        body=back.value,
        queue_id=0,
        queue_offset=0,
        timestamp=2_000,
        append_time=False,
        headers=list(back.headers),
    )
    assert (again.topic, again.reconsume_times, again.id) == ("Orders", 1, "ID1")
    second = sent_back(again, to_topic="%RETRY%G", level=4, max_reconsume_times=16)
    assert second.reconsume_times == 2
    assert second.properties[prop.RETRY_TOPIC] == "Orders"
    assert second.properties[prop.ORIGIN_MESSAGE_ID] == "ID1"
    assert again.born_timestamp == 1_000, "the born time survives the round trip"
