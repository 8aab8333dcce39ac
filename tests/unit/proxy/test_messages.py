"""What the proxy checks in a message before it is sent, and the code each refusal carries."""

from __future__ import annotations

import gzip
import hashlib
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from adapter import properties as prop
from adapter.message import ReceivedMessage
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import ALL_TYPES
from adapter.proxy.messages import outbound, to_protocol, to_resource
from adapter.proxy.protocol import definition

pytestmark = pytest.mark.timeout(30)

ID = "0102FC000000012F2E0B18D4E900000008"
T = definition.MessageType


def message(kind: int = T.NORMAL, body: bytes = b"hello", **system: Any) -> Any:
    props = definition.SystemProperties(message_id=ID, message_type=kind, **system)
    return definition.Message(
        topic=definition.Resource(name="Orders"), system_properties=props, body=body
    )


def check(msg: Any, accepted: frozenset[str] = ALL_TYPES, max_body_size: int = 1024) -> Any:
    return outbound(msg, max_body_size=max_body_size, accepted=lambda _: accepted)


def refused(msg: Any, **kwargs: Any) -> int:
    with pytest.raises(ProxyError) as caught:
        check(msg, **kwargs)
    return caught.value.code


def test_a_lite_message_is_routed_and_keyed_by_its_lite_topic_and_comes_back_with_it() -> None:
    out = check(message(T.LITE, lite_topic="chat-1"))

    assert (out.kind, out.message_group) == ("LITE", "chat-1")
    assert dict(out.wire.headers(out.message_id))[prop.LITE_TOPIC] == b"chat-1"


def test_a_normal_message_keeps_its_id_tag_keys_and_properties() -> None:
    msg = message(tag="TagA", keys=["k1", "k2"])
    msg.user_properties["color"] = "red"
    out = check(msg)
    assert (out.topic, out.message_id, out.kind) == ("Orders", ID, "NORMAL")
    headers = dict(out.wire.headers(out.message_id))
    assert headers[prop.UNIQ_KEY] == ID.encode()
    assert headers[prop.TAGS] == b"TagA"
    assert headers[prop.KEYS] == b"k1 k2"
    assert headers["color"] == b"red"


def test_a_fifo_message_carries_its_group_as_the_sharding_key() -> None:
    out = check(message(T.FIFO, message_group="g1"))
    assert (out.kind, out.message_group) == ("FIFO", "g1")
    assert dict(out.wire.headers(ID))[prop.SHARDING_KEY] == b"g1"


def test_a_delay_message_is_due_at_its_delivery_time_never_earlier() -> None:
    stamp = Timestamp(seconds=1_800_000_000, nanos=1)
    out = check(message(T.DELAY, delivery_timestamp=stamp))
    assert out.deliver_at_ms == 1_800_000_000_001


def test_an_unspecified_type_is_taken_from_what_the_message_carries() -> None:
    assert check(message(0, message_group="g")).kind == "FIFO"
    assert check(message(0)).kind == "NORMAL"


def test_a_priority_message_carries_its_priority_and_comes_back_with_it() -> None:
    out = check(message(T.PRIORITY, priority=7))
    assert (out.kind, out.priority) == ("PRIORITY", 7)
    assert dict(out.wire.headers(ID))[prop.PRIORITY] == b"7"
    assert check(message(0, priority=0)).kind == "PRIORITY"
    back = to_protocol(
        ReceivedMessage(
            topic="Orders", kafka_topic="Orders.priority-7", body=b"x", queue_id=0,
            queue_offset=0, timestamp=1, append_time=False,
            headers=[(prop.UNIQ_KEY, ID.encode()), (prop.PRIORITY, b"7")],
        ),
        message_type=T.PRIORITY,
    )  # fmt: skip
    assert (back.system_properties.priority, dict(back.user_properties)) == (7, {})


def test_a_gzip_body_is_stored_inflated() -> None:
    msg = message(body=gzip.compress(b"x" * 100), body_encoding=definition.Encoding.GZIP)
    assert check(msg).wire.body == b"x" * 100


def test_a_transactional_message_with_a_recovery_duration_gets_its_immunity() -> None:
    msg = message(T.TRANSACTION)
    msg.system_properties.orphaned_transaction_recovery_duration.seconds = 12
    assert check(msg).wire.properties[prop.CHECK_IMMUNITY_TIME_IN_SECONDS] == b"12"


@pytest.mark.parametrize(
    ("msg", "code"),
    [
        (message(body=b""), Code.MESSAGE_BODY_EMPTY),
        (message(body=b"x" * 1025), Code.MESSAGE_BODY_TOO_LARGE),
        (message(tag="a|b"), Code.ILLEGAL_MESSAGE_TAG),
        (message(tag=" "), Code.ILLEGAL_MESSAGE_TAG),
        (message(keys=["ok", " "]), Code.ILLEGAL_MESSAGE_KEY),
        (message(T.FIFO), Code.ILLEGAL_MESSAGE_GROUP),
        (message(T.DELAY), Code.ILLEGAL_DELIVERY_TIME),
        (message(T.NORMAL, message_group="g"), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message(T.TRANSACTION, message_group="g"), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message(T.LITE), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message(T.LITE, lite_topic="a", priority=1), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message(T.LITE, lite_topic="chat/1"), Code.ILLEGAL_LITE_TOPIC),
        (message(T.PRIORITY), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (message(T.PRIORITY, priority=-1), Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        (
            message(T.PRIORITY, priority=1, message_group="g"),
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        ),
        (message(99), Code.BAD_REQUEST),
        (message(body_encoding=7), Code.BAD_REQUEST),
        (
            message(body=b"not gzip", body_encoding=definition.Encoding.GZIP),
            Code.MESSAGE_CORRUPTED,
        ),
        (
            message(body_digest=definition.Digest(type=definition.DigestType.MD5, checksum="00")),
            Code.MESSAGE_CORRUPTED,
        ),
    ],
)
def test_a_message_breaking_a_rule_is_refused_with_its_code(msg: Any, code: int) -> None:
    assert refused(msg) == code


def test_a_transactional_message_with_a_delivery_time_conflicts_with_its_type() -> None:
    msg = message(T.TRANSACTION)
    msg.system_properties.delivery_timestamp.seconds = 1_800_000_000
    assert refused(msg) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_a_type_the_topic_does_not_accept_conflicts_with_it() -> None:
    msg = message(T.FIFO, message_group="g")
    assert refused(msg, accepted=frozenset({"NORMAL"})) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


@pytest.mark.parametrize(
    "name", [prop.UNIQ_KEY, prop.SHARDING_KEY, prop.PRIORITY, prop.TIMER_DELIVER_MS, " "]
)
def test_a_property_named_like_the_system_s_is_refused(name: str) -> None:
    msg = message()
    msg.user_properties[name] = "v"
    assert refused(msg) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_too_many_property_bytes_are_refused() -> None:
    msg = message()
    msg.user_properties["big"] = "v" * 20_000
    assert refused(msg) == Code.MESSAGE_PROPERTIES_TOO_LARGE


@pytest.mark.parametrize("message_id", ["", "a b", "x" * 200, "é"])
def test_a_missing_or_odd_message_id_is_refused(message_id: str) -> None:
    msg = message()
    msg.system_properties.message_id = message_id
    assert refused(msg) == Code.ILLEGAL_MESSAGE_ID


@pytest.mark.parametrize("name", ["", "a b", "a/b"])
def test_a_bad_topic_name_is_an_illegal_topic(name: str) -> None:
    msg = message()
    msg.topic.name = name
    assert refused(msg) == Code.ILLEGAL_TOPIC


def test_a_namespaced_message_goes_to_its_namespace_s_topic_and_comes_back_apart() -> None:
    msg = message()
    msg.topic.resource_namespace = "shopA"
    out = check(msg)
    assert out.topic == "shopA%Orders"
    assert to_resource(out.topic) == definition.Resource(name="Orders", resource_namespace="shopA")


def test_a_namespace_rocketmq_would_refuse_is_a_bad_request() -> None:
    msg = message()
    msg.topic.resource_namespace = "shop A"
    assert refused(msg) == Code.BAD_REQUEST


@given(st.binary(max_size=300))
def test_any_bytes_parsed_as_a_message_are_sent_or_refused_with_a_code(raw: bytes) -> None:
    try:
        msg = definition.Message.FromString(raw)
    except Exception:  # noqa: BLE001 - not a message at all: gRPC refuses it before us
        return
    try:
        check(msg)
    except ProxyError as exc:
        code = exc.code
    else:
        code = Code.OK
    assert Code.Name(code)


def test_a_checked_message_goes_back_to_the_client_with_its_id_and_an_md5_digest() -> None:
    received = ReceivedMessage(
        topic="Orders",
        kafka_topic="x",
        body=b"body",
        queue_id=3,
        queue_offset=42,
        timestamp=1_700_000_000_123,
        append_time=False,
        headers=[
            (prop.UNIQ_KEY, ID.encode()),
            (prop.TAGS, b"TagA"),
            (prop.KEYS, b"k1 k2"),
            ("color", b"red"),
            (prop.TRANSACTION_CHECK_TIMES, b"2"),
        ],
    )
    msg = to_protocol(received, message_type=T.TRANSACTION)
    system = msg.system_properties
    assert (system.message_id, system.tag, list(system.keys)) == (ID, "TagA", ["k1", "k2"])
    assert dict(msg.user_properties) == {"color": "red"}
    assert system.body_digest.checksum == hashlib.md5(b"body").hexdigest().upper()  # noqa: S324
    assert (system.queue_id, system.queue_offset) == (3, 42)
    assert system.born_timestamp.ToMilliseconds() == 1_700_000_000_123
