"""The share group requests' answers, laid out field by field as kafka-clients' message specs
(``common/message/*.json``) say, decoded into what ``groups`` shows."""

from __future__ import annotations

import pytest

from adapter.ops import share_protocol as wire
from adapter.ops.protocol_codec import Reader, Writer

pytestmark = pytest.mark.timeout(10)

TOPIC_ID = "12345678-1234-5678-1234-567812345678"


def offsets_answer(version: int) -> bytes:
    """DescribeShareGroupOffsets: one group, one topic, partition 0 at SPSO 4 (lag 2), and
    partition 1 that the group has not fetched (SPSO -1)."""
    w = Writer().int32(0).uvarint(2).string("GID_simple").uvarint(2).string("Orders")
    w.uuid(TOPIC_ID)
    w.uvarint(3)
    for partition, start, lag in [(0, 4, 2), (1, -1, -1)]:
        w.int32(partition).int64(start).int32(0)
        if version >= 1:
            w.int64(lag)
        w.int16(0).string(None).tags()
    return w.tags().int16(0).string(None).tags().tags().bytes()


def test_start_offsets_come_with_kafka_s_lag_from_version_1() -> None:
    [group] = wire.describe_offsets_response(Reader(offsets_answer(1)), 1)
    assert (group.group_id, group.error) == ("GID_simple", 0)
    assert group.offsets == (
        wire.StartOffset("Orders", 0, 4, 2, 0, None),
        wire.StartOffset("Orders", 1, -1, -1, 0, None),
    )


def test_version_0_start_offsets_have_no_lag() -> None:
    [group] = wire.describe_offsets_response(Reader(offsets_answer(0)), 0)
    assert [o.lag for o in group.offsets] == [-1, -1]


def test_a_described_share_group_names_its_members_and_their_partitions() -> None:
    w = Writer().int32(0).uvarint(2).int16(0).string(None).string("GID_simple").string("Stable")
    w.int32(3).int32(3).string("simple").uvarint(2)
    w.string("member-1").string(None).int32(3).string("rmq-1#0").string("/127.0.0.1")
    w.array(["Orders"], Writer.string).uvarint(2).uuid(TOPIC_ID)
    w.string("Orders").array([1, 0], Writer.int32).tags().tags().tags()
    w.int32(-(2**31)).tags().tags()
    [group] = wire.share_group_describe_response(Reader(w.bytes()))
    assert (group.group_id, group.state, group.error) == ("GID_simple", "Stable", 0)
    assert group.members == (
        wire.ShareMember("member-1", "rmq-1#0", "/127.0.0.1", (("Orders", 0), ("Orders", 1))),
    )


def test_only_share_groups_are_kept_from_a_group_listing() -> None:
    w = Writer().int32(0).int16(0).uvarint(3)
    w.string("GID_simple").string("share").string("Empty").string("share").tags()
    w.string("GID_push").string("consumer").string("Stable").string("consumer").tags()
    error, groups = wire.list_groups_response(Reader(w.tags().bytes()))
    assert (error, groups) == (0, [wire.ListedGroup("GID_simple", "Empty")])


def test_a_listing_asks_for_share_groups_in_any_state() -> None:
    assert wire.list_share_groups_request() == b"\x01" + b"\x02\x06share" + b"\x00"


def test_a_reset_sends_each_topic_once_with_its_partitions_new_start_offsets() -> None:
    body = wire.alter_offsets_request("G", [("T", 1, 5), ("T", 0, 7)])
    expected = Writer().string("G").uvarint(2).string("T").uvarint(3)
    expected.int32(1).int64(5).tags().int32(0).int64(7).tags().tags().tags()
    assert body == expected.bytes()


def test_the_version_asked_is_the_highest_both_sides_speak() -> None:
    offsets = wire.DESCRIBE_SHARE_GROUP_OFFSETS
    assert wire.version(offsets, {offsets: (0, 1)}) == 1
    assert wire.version(offsets, {offsets: (0, 0)}) == 0, "a Kafka without KIP-1226's lag"
    assert wire.version(offsets, {}) is None, "a Kafka without share groups"
    assert wire.version(wire.LIST_GROUPS, {wire.LIST_GROUPS: (0, 4)}) is None, "no type filter"
