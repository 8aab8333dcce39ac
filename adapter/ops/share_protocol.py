"""The five Kafka requests that read and move a share group, encoded and decoded by hand.

Not a RocketMQ behaviour: the 5.x ``SimpleConsumer``'s groups are Kafka share groups (KIP-932),
and confluent-kafka 2.16 can neither list them (``ConsumerGroupType`` has no ``SHARE``;
``list_consumer_groups`` leaves them out and ``describe_consumer_groups`` calls one a dead
classic group) nor read their share-partition start offsets (SPSO). Kafka's Java ``Admin`` can
(``describeShareGroups``, ``listShareGroupOffsets``, ``alterShareGroupOffsets``), but a JVM
started per reading costs one to two seconds of CPU (the exporter reads every 15 s) and a JDK
the wheel's users may not have. The requests themselves are small, all in Kafka's flexible
encoding, so this module speaks them: ``ApiVersions`` (v3), ``ListGroups`` (v5, types filter
``share``), ``FindCoordinator`` (v6), ``ShareGroupDescribe`` (v1),
``DescribeShareGroupOffsets`` (v1, with Kafka's own lag, KIP-1226; v0 without it) and
``AlterShareGroupOffsets`` (v0). Pure: bytes in, dataclasses out; the connection is
:mod:`adapter.ops.share_groups`. Field layouts follow the message specs in kafka-clients'
``common/message/*.json``.

Known gaps: only the fields the groups commands show are kept; tagged fields are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adapter.ops.protocol_codec import Reader, Writer

API_VERSIONS = 18
LIST_GROUPS = 16
FIND_COORDINATOR = 10
SHARE_GROUP_DESCRIBE = 77
DESCRIBE_SHARE_GROUP_OFFSETS = 90
ALTER_SHARE_GROUP_OFFSETS = 91

SPOKEN: dict[int, tuple[int, int]] = {
    API_VERSIONS: (3, 3),
    LIST_GROUPS: (5, 5),
    FIND_COORDINATOR: (6, 6),
    SHARE_GROUP_DESCRIBE: (1, 1),
    DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ALTER_SHARE_GROUP_OFFSETS: (0, 0),
}
"""The versions of each request this module encodes, lowest and highest."""

ERRORS = {
    15: "COORDINATOR_NOT_AVAILABLE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    16: "NOT_COORDINATOR",
    24: "INVALID_GROUP_ID",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    68: "NON_EMPTY_GROUP",
    69: "GROUP_ID_NOT_FOUND",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    1: "OFFSET_OUT_OF_RANGE",
    -1: "UNKNOWN_SERVER_ERROR",
}
RETRIABLE = {14, 15, 16}
GROUP_ID_NOT_FOUND = 69


def error_name(code: int) -> str:
    return ERRORS.get(code, f"error {code}")


# ApiVersions ------------------------------------------------------------------------------


def api_versions_request() -> bytes:
    return Writer().string("rmq-adapter").string("1").tags().bytes()


def api_versions_response(r: Reader) -> tuple[int, dict[int, tuple[int, int]]]:
    """The error code and each request's (min, max) version the broker speaks."""
    error = r.int16()

    def one(r: Reader) -> tuple[int, int, int]:
        key, low, high = r.int16(), r.int16(), r.int16()
        r.tags()
        return key, low, high

    keys = r.array(one)
    return error, {key: (low, high) for key, low, high in keys}


def version(api_key: int, broker: dict[int, tuple[int, int]]) -> int | None:
    """The highest version of ``api_key`` both sides speak, ``None`` if none."""
    ours, theirs = SPOKEN[api_key], broker.get(api_key)
    if theirs is None:
        return None
    high = min(ours[1], theirs[1])
    return high if high >= max(ours[0], theirs[0]) else None


# ListGroups v5 ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    state: str


def list_share_groups_request() -> bytes:
    return Writer().array([], Writer.string).array(["share"], Writer.string).tags().bytes()


def list_groups_response(r: Reader) -> tuple[int, list[ListedGroup]]:
    r.int32()
    error = r.int16()

    def one(r: Reader) -> ListedGroup | None:
        group_id, _protocol, state, kind = r.text(), r.text(), r.text(), r.text()
        r.tags()
        return ListedGroup(group_id, state) if kind.lower() == "share" else None

    groups = [g for g in r.array(one) if g is not None]
    r.tags()
    return error, groups


# FindCoordinator v6 -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Coordinator:
    key: str
    node_id: int
    host: str
    port: int
    error: int
    message: str | None


def find_coordinator_request(group_ids: Sequence[str]) -> bytes:
    return Writer().int8(0).array(list(group_ids), Writer.string).tags().bytes()


def find_coordinator_response(r: Reader) -> list[Coordinator]:
    r.int32()

    def one(r: Reader) -> Coordinator:
        found = Coordinator(r.text(), r.int32(), r.text(), r.int32(), r.int16(), r.string())
        r.tags()
        return found

    found = r.array(one)
    r.tags()
    return found


# ShareGroupDescribe v1 --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]
    """The (topic, partition) pairs assigned to the member."""


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    error: int
    message: str | None
    state: str
    members: tuple[ShareMember, ...]


def share_group_describe_request(group_ids: Sequence[str]) -> bytes:
    return Writer().array(list(group_ids), Writer.string).int8(0).tags().bytes()


def _assigned(r: Reader) -> list[tuple[str, int]]:
    r.uuid()
    topic = r.text()
    partitions = r.array(Reader.int32)
    r.tags()
    return [(topic, p) for p in partitions]


def _member(r: Reader) -> ShareMember:
    member_id = r.text()
    r.string()  # rack
    r.int32()  # member epoch
    client_id, host = r.text(), r.text()
    r.array(Reader.string)  # subscribed topics
    pairs = [pair for topic in r.array(_assigned) for pair in topic]
    r.tags()  # the assignment struct's
    r.tags()
    return ShareMember(member_id, client_id, host, tuple(sorted(pairs)))


def share_group_describe_response(r: Reader) -> list[DescribedShareGroup]:
    r.int32()

    def one(r: Reader) -> DescribedShareGroup:
        error, message, group_id, state = r.int16(), r.string(), r.text(), r.text()
        r.int32()  # group epoch
        r.int32()  # assignment epoch
        r.text()  # assignor
        members = r.array(_member)
        r.int32()  # authorized operations
        r.tags()
        return DescribedShareGroup(group_id, error, message, state, tuple(members))

    groups = r.array(one)
    r.tags()
    return groups


# DescribeShareGroupOffsets v0/v1 ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartOffset:
    topic: str
    partition: int
    start_offset: int
    """The share-partition start offset (SPSO); -1 when the group has none there yet."""
    lag: int
    """Kafka's lag (v1, KIP-1226); -1 when the broker did not say."""
    error: int
    message: str | None


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    group_id: str
    error: int
    message: str | None
    offsets: tuple[StartOffset, ...]


def describe_offsets_request(group_ids: Sequence[str]) -> bytes:
    def group(w: Writer, group_id: str) -> None:
        w.string(group_id).array(None, Writer.string).tags()  # null topics: all of them

    return Writer().array(list(group_ids), group).tags().bytes()


def describe_offsets_response(r: Reader, version: int) -> list[GroupOffsets]:
    r.int32()

    def partition(r: Reader, topic: str) -> StartOffset:
        index, start = r.int32(), r.int64()
        r.int32()  # leader epoch
        lag = r.int64() if version >= 1 else -1
        found = StartOffset(topic, index, start, lag, r.int16(), r.string())
        r.tags()
        return found

    def topic(r: Reader) -> list[StartOffset]:
        name = r.text()
        r.uuid()
        found = r.array(lambda r: partition(r, name))
        r.tags()
        return found

    def group(r: Reader) -> GroupOffsets:
        group_id = r.text()
        offsets = [o for t in r.array(topic) for o in t]
        error, message = r.int16(), r.string()
        r.tags()
        return GroupOffsets(group_id, error, message, tuple(offsets))

    groups = r.array(group)
    r.tags()
    return groups


# AlterShareGroupOffsets v0 ----------------------------------------------------------------


def alter_offsets_request(group_id: str, offsets: Sequence[tuple[str, int, int]]) -> bytes:
    """``offsets``: (topic, partition, new start offset)."""
    topics: dict[str, list[tuple[int, int]]] = {}
    for name, partition, offset in offsets:
        topics.setdefault(name, []).append((partition, offset))

    def part(w: Writer, item: tuple[int, int]) -> None:
        w.int32(item[0]).int64(item[1]).tags()

    def topic(w: Writer, item: tuple[str, list[tuple[int, int]]]) -> None:
        w.string(item[0]).array(item[1], part).tags()

    return Writer().string(group_id).array(sorted(topics.items()), topic).tags().bytes()


def alter_offsets_response(
    r: Reader,
) -> tuple[int, str | None, list[tuple[str, int, int, str | None]]]:
    """The group's error and message, and each (topic, partition, error, message)."""
    r.int32()
    error, message = r.int16(), r.string()

    def partition(r: Reader, topic: str) -> tuple[str, int, int, str | None]:
        found = (topic, r.int32(), r.int16(), r.string())
        r.tags()
        return found

    def topic(r: Reader) -> list[tuple[str, int, int, str | None]]:
        name = r.text()
        r.uuid()
        found = r.array(lambda r: partition(r, name))
        r.tags()
        return found

    parts = [p for t in r.array(topic) for p in t]
    r.tags()
    return error, message, parts
