"""The pure parts of delayed delivery: due times, head-of-line order, envelopes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.message import Message, ReceivedMessage
from adapter.schedule.due import corrected_due_ms, due_ms
from adapter.schedule.envelope import delivered, scheduled, sent_back
from adapter.schedule.head_of_line import Entry, HeadOfLine

LEVELS = DelayLevels.parse()


def test_due_is_store_time_plus_the_level_delay() -> None:
    assert due_ms(1_000_000, 1, LEVELS) == 1_001_000
    assert due_ms(1_000_000, 3, LEVELS) == 1_010_000
    assert due_ms(1_000_000, 18, LEVELS) == 1_000_000 + 7_200_000


def test_a_level_above_the_table_uses_the_highest_delay() -> None:
    assert due_ms(0, 99, LEVELS) == 7_200_000


def test_a_due_time_beyond_now_plus_the_delay_is_due_now() -> None:
    # The broker's clock jumped back: the record looks further away than its level allows.
    assert corrected_due_ms(due=50_000, now_ms=10_000, level=1, levels=LEVELS) == 10_000
    assert corrected_due_ms(due=11_000, now_ms=10_000, level=1, levels=LEVELS) == 11_000


entries = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000)), min_size=1, max_size=60)


def queue_of(items: list[tuple[int, int]]) -> HeadOfLine[str]:
    heads: HeadOfLine[str] = HeadOfLine()
    offsets = {p: 0 for p in range(4)}
    dues = {p: 0 for p in range(4)}
    for partition, step in items:
        dues[partition] += step  # one level: due times never go down
        heads.push(Entry(partition, offsets[partition], dues[partition], f"{partition}"))
        offsets[partition] += 1
    return heads


@given(entries, st.integers(0, 200_000), st.integers(1, 100))
def test_nothing_is_taken_before_it_is_due_and_each_level_keeps_its_order(
    items: list[tuple[int, int]], now: int, limit: int
) -> None:
    heads = queue_of(items)
    taken = heads.take_due(now, limit)
    assert len(taken) <= limit
    assert all(e.due_ms <= now for e in taken)
    for partition in range(4):
        offsets = [e.offset for e in taken if e.partition == partition]
        assert offsets == list(range(len(offsets))), "a level is taken from its head, in order"
        head = heads.head(partition)
        if head is not None and len(taken) < limit:
            assert head.due_ms > now, "a due head is not left behind while there is room"


@given(entries, st.integers(0, 200_000))
def test_entries_put_back_are_taken_again_in_the_same_order(
    items: list[tuple[int, int]], now: int
) -> None:
    heads = queue_of(items)
    first = heads.take_due(now, 1000)
    heads.put_back(first)
    again = heads.take_due(now, 1000)
    assert sorted(again, key=lambda e: (e.partition, e.offset)) == sorted(
        first, key=lambda e: (e.partition, e.offset)
    )


def test_a_blocked_level_waits_while_the_others_go_on() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    heads.push(Entry(0, 0, 100, "a"))
    heads.push(Entry(1, 0, 100, "b"))
    heads.block(0, until_ms=5_000)
    assert [e.item for e in heads.take_due(1_000, 10)] == ["b"]
    assert heads.next_wakeup_ms() == 5_000
    assert [e.item for e in heads.take_due(5_000, 10)] == ["a"]


def test_the_wakeup_is_the_earliest_head() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    assert heads.next_wakeup_ms() is None
    heads.push(Entry(0, 0, 3_000, "a"))
    heads.push(Entry(1, 0, 2_000, "b"))
    heads.push(Entry(1, 1, 9_000, "c"))
    assert heads.next_wakeup_ms() == 2_000
    heads.drop(1)
    assert heads.next_wakeup_ms() == 3_000


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
