"""A 5.x ``Message`` of the protocol, checked and turned into the adapter's message, and back.

Reproduces what RocketMQ's proxy checks in ``SendMessageActivity`` before it stores a message,
with the protocol's codes: the topic (``ILLEGAL_TOPIC``), the message id the client made
(``ILLEGAL_MESSAGE_ID``; it stays the message's id, its ``UNIQ_KEY``), the body (empty:
``MESSAGE_BODY_EMPTY``, over the limit: ``MESSAGE_BODY_TOO_LARGE``, a GZIP body that does not
inflate or a digest that does not match: ``MESSAGE_CORRUPTED``), the tag (blank or with ``|``:
``ILLEGAL_MESSAGE_TAG``), keys (``ILLEGAL_MESSAGE_KEY``), user properties (blank, or named
like a system property: ``ILLEGAL_MESSAGE_PROPERTY_KEY``; too many or too large:
``MESSAGE_PROPERTIES_TOO_LARGE``), and the message type against what the message carries and
what its topic accepts: a FIFO message needs a message group (``ILLEGAL_MESSAGE_GROUP``), a
DELAY one a delivery time (``ILLEGAL_DELIVERY_TIME``); a transactional message with a delivery
time or a group, a normal one with either, a PRIORITY one without a priority of 0 or more
or with either, a LITE one without a lite topic (or with a time, group or priority), or a type its
topic does not accept is ``MESSAGE_PROPERTY_CONFLICT_WITH_TYPE``; an unknown type is
``BAD_REQUEST``.

On Kafka the message is the record ``adapter.v5`` writes (:mod:`adapter.properties`):
body as value; ``UNIQ_KEY``, ``TAGS``, ``KEYS`` (space-separated), user properties as headers;
the message group as ``__SHARDINGKEY``; the priority as ``__PRIORITY`` (and a received
message's priority comes back from it); a lite topic as ``__LITE_TOPIC`` (routed and keyed by
it, as a message group); a transactional message's recovery duration as
``CHECK_IMMUNITY_TIME_IN_SECONDS``.

:func:`to_protocol` is the way back, for a check-back's ``RecoverOrphanedTransactionCommand``:
the half message with its id, tag, keys, properties, birth, and an MD5 digest (the Java and
Python clients agree on its spelling; their CRC32 spellings differ).

Known gaps: the born host is not kept (RocketMQ keeps it); keys holding a space split on the
way back, as in RocketMQ.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import InvalidNameError
from adapter.message import Message as WireMessage
from adapter.message import ReceivedMessage
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.protocol import definition

__all__ = ["Outbound", "outbound", "resource_name", "to_protocol"]

MAX_MESSAGE_ID = 128
MAX_GROUP = 128
MAX_PROPERTIES = 128
MAX_PROPERTIES_BYTES = 16 * 1024
"""RocketMQ 5's limits on user properties (``maxUserPropertySize``, 16 KiB)."""
SYSTEM_PROPERTIES = prop.RESERVED | {prop.SHARDING_KEY, prop.PRIORITY, *prop.DELIVERY_TIME}
_TYPES = {1: "NORMAL", 2: "FIFO", 3: "DELAY", 4: "TRANSACTION", 5: "LITE", 6: "PRIORITY"}
_UNSUPPORTED: dict[int, str] = {}
_KEY_SEPARATOR = " "


@dataclass(frozen=True, slots=True)
class Outbound:
    """A message of a ``SendMessage`` request, checked: what to send, and how."""

    topic: str
    message_id: str
    kind: str
    """NORMAL, FIFO, DELAY, TRANSACTION or PRIORITY."""
    wire: WireMessage
    message_group: str | None
    deliver_at_ms: int | None
    priority: int | None = None
    """A PRIORITY message's priority: its band is chosen at send (:mod:`adapter.priorities`)."""


def resource_name(resource: Any, what: str = "topic") -> str:
    """The name of a ``Resource``, in its namespace as RocketMQ names it
    (``<namespace>%<name>``, :func:`adapter.naming.with_namespace`)."""
    if not resource.name:
        code = Code.ILLEGAL_TOPIC if what == "topic" else Code.BAD_REQUEST
        raise ProxyError(code, f"no {what} name")
    try:
        return naming.with_namespace(str(resource.resource_namespace), str(resource.name))
    except InvalidNameError as exc:
        raise ProxyError(Code.BAD_REQUEST, f"{what} {resource.name!r}: {exc}") from exc


def to_resource(name: str) -> Any:
    """A topic or group name as the protocol's ``Resource``: its namespace apart."""
    namespace, plain = naming.split_namespace(name)
    return definition.Resource(name=plain, resource_namespace=namespace)


def _topic(message: Any) -> str:
    topic = resource_name(message.topic)
    try:
        naming.sendable_kafka_topic(topic)
    except InvalidNameError as exc:
        raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from exc
    return topic


def _message_id(system: Any) -> str:
    message_id = str(system.message_id)
    if not message_id or len(message_id) > MAX_MESSAGE_ID or not message_id.isascii():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, f"message id {message_id[:140]!r} is not valid")
    if not message_id.isprintable() or " " in message_id:
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, f"message id {message_id!r} is not valid")
    return message_id


def _body(message: Any, max_size: int) -> bytes:
    body = bytes(message.body)
    system = message.system_properties
    if system.body_encoding == definition.Encoding.GZIP:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, max_size + 1)
        except zlib.error as exc:
            raise ProxyError(Code.MESSAGE_CORRUPTED, f"GZIP body does not inflate: {exc}") from exc
    elif system.body_encoding not in (
        definition.Encoding.IDENTITY,
        definition.Encoding.ENCODING_UNSPECIFIED,
    ):
        raise ProxyError(Code.BAD_REQUEST, f"unknown body encoding {system.body_encoding}")
    if not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "the message body is empty")
    if len(body) > max_size:
        raise ProxyError(
            Code.MESSAGE_BODY_TOO_LARGE,
            f"the message body is larger than {max_size} bytes"
            + ("" if system.body_encoding == definition.Encoding.GZIP else f": {len(body)}"),
        )
    if system.HasField("body_digest") and system.body_digest.checksum:
        _check_digest(bytes(message.body), system.body_digest)
    return body


def _digest(kind: int, body: bytes) -> list[str]:
    """How the clients spell a digest of ``body`` (CRC32 with or without leading zeros)."""
    if kind == definition.DigestType.CRC32:
        crc = zlib.crc32(body) & 0xFFFFFFFF
        return [format(crc, "08X"), format(crc, "X")]
    if kind == definition.DigestType.MD5:
        return [hashlib.md5(body, usedforsecurity=False).hexdigest().upper()]
    if kind == definition.DigestType.SHA1:
        return [hashlib.sha1(body, usedforsecurity=False).hexdigest().upper()]
    return []


def _check_digest(body: bytes, digest: Any) -> None:
    expected = _digest(digest.type, body)
    if expected and str(digest.checksum).upper() not in expected:
        raise ProxyError(Code.MESSAGE_CORRUPTED, "the body does not match its digest")


def _kind(system: Any, topic: str, accepted: frozenset[str]) -> str:
    number = int(system.message_type)
    if number in _UNSUPPORTED:
        raise ProxyError(Code.UNSUPPORTED, f"{_UNSUPPORTED[number]} messages are not supported")
    has_group = bool(system.message_group)
    has_time = system.HasField("delivery_timestamp")
    has_priority = system.HasField("priority")
    if number == 0:  # unspecified: what the message carries says
        number = 2 if has_group else 3 if has_time else 6 if has_priority else 1
    kind = _TYPES.get(number)
    if kind is None:
        raise ProxyError(Code.BAD_REQUEST, f"unknown message type {number}")
    if kind == "TRANSACTION" and (has_time or has_group):
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a transactional message cannot have a delivery time or a message group",
        )
    if kind == "NORMAL" and (has_time or has_group):
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a NORMAL message cannot have a delivery time or a message group (send it as "
            "DELAY or FIFO)",
        )
    if kind == "FIFO" and (not has_group or not system.message_group.strip() or has_time):
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
    if kind == "DELAY" and (not has_time or has_group):
        raise ProxyError(Code.ILLEGAL_DELIVERY_TIME, "a DELAY message needs a delivery time")
    has_lite = bool(system.lite_topic.strip()) if system.HasField("lite_topic") else False
    if kind == "LITE" and (not has_lite or has_time or has_group or has_priority):
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a LITE message needs a lite topic, and no delivery time, group or priority",
        )
    if kind == "PRIORITY" and (not has_priority or system.priority < 0 or has_time or has_group):
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a PRIORITY message needs a priority of 0 or more, and no delivery time or group",
        )
    if kind not in accepted:
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"topic {topic!r} accepts {'+'.join(sorted(accepted))} messages, not {kind}",
        )
    return kind


def _lite_topic(name: str) -> str:
    try:
        return naming.validate_lite_topic(name)
    except InvalidNameError as exc:
        raise ProxyError(Code.ILLEGAL_LITE_TOPIC, str(exc)) from exc


def _deliver_at_ms(system: Any) -> int | None:
    if not system.HasField("delivery_timestamp"):
        return None
    stamp = system.delivery_timestamp
    if stamp.seconds <= 0 or not 0 <= stamp.nanos < 1_000_000_000:
        raise ProxyError(Code.ILLEGAL_DELIVERY_TIME, "the delivery time is not a valid time")
    return int(stamp.seconds) * 1000 + -(-int(stamp.nanos) // 1_000_000)  # never early


def _user_properties(message: Any) -> dict[str, str]:
    found = dict(message.user_properties)
    if len(found) > MAX_PROPERTIES:
        raise ProxyError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE, f"more than {MAX_PROPERTIES} user properties"
        )
    size = 0
    for name, value in found.items():
        if not name.strip() or name in SYSTEM_PROPERTIES:
            raise ProxyError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"property {name!r} is blank or used by the system, use another name",
            )
        if not value:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {name!r} is empty")
        size += len(name.encode()) + len(value.encode())
    if size > MAX_PROPERTIES_BYTES:
        raise ProxyError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"user properties take {size} bytes, over {MAX_PROPERTIES_BYTES}",
        )
    return found


def outbound(
    message: Any, *, max_body_size: int, accepted: Callable[[str], frozenset[str]]
) -> Outbound:
    """``message`` (a protocol ``Message``) checked; a :class:`ProxyError` with the code of the
    first rule it breaks."""
    topic = _topic(message)
    system = message.system_properties
    message_id = _message_id(system)
    body = _body(message, max_body_size)
    kind = _kind(system, topic, accepted(topic))
    wire = WireMessage(topic)
    wire.set_body(body)
    if system.HasField("tag"):
        if not system.tag.strip() or "|" in system.tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, f"tag {system.tag!r} is blank or has '|'")
        wire.set_tags(system.tag)
    if system.keys:
        if any(not key.strip() for key in system.keys):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "a message key is blank")
        wire.set_keys(_KEY_SEPARATOR.join(system.keys))
    for name, value in _user_properties(message).items():
        wire.set_property(name, value)
    group = str(system.message_group) if kind == "FIFO" else None
    if group is not None:
        if len(group) > MAX_GROUP:
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group over {MAX_GROUP} chars")
        wire.put_property(prop.SHARDING_KEY, group)
    if kind == "LITE":
        group = _lite_topic(str(system.lite_topic))
        wire.put_property(prop.LITE_TOPIC, group)
    if kind == "TRANSACTION" and system.HasField("orphaned_transaction_recovery_duration"):
        seconds = system.orphaned_transaction_recovery_duration.seconds
        if seconds > 0:
            wire.set_property(prop.CHECK_IMMUNITY_TIME_IN_SECONDS, str(seconds))
    priority = int(system.priority) if kind == "PRIORITY" else None
    if priority is not None:
        wire.put_property(prop.PRIORITY, str(priority))
    return Outbound(topic, message_id, kind, wire, group, _deliver_at_ms(system), priority)


def _timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def to_protocol(received: ReceivedMessage, *, message_type: int) -> Any:
    """A consumed (or checked) message as a protocol ``Message``."""
    body = received.body
    properties = {
        name: value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        for name, value in received.properties.items()
        if name not in SYSTEM_PROPERTIES and name != prop.CHECK_IMMUNITY_TIME_IN_SECONDS
    }
    system = definition.SystemProperties(
        message_id=received.id,
        body_digest=definition.Digest(
            type=definition.DigestType.MD5,
            checksum=hashlib.md5(body, usedforsecurity=False).hexdigest().upper(),
        ),
        body_encoding=definition.Encoding.IDENTITY,
        message_type=message_type,
        born_timestamp=_timestamp(received.born_timestamp),
        store_timestamp=_timestamp(received.store_timestamp),
        queue_id=received.queue_id,
        queue_offset=received.queue_offset,
        delivery_attempt=1,
    )
    if received.tags:
        system.tag = received.tags.decode("utf-8", "replace")
    if received.keys:
        keys = received.keys.decode("utf-8", "replace").split(_KEY_SEPARATOR)
        system.keys.extend(key for key in keys if key)
    group = received.properties.get(prop.SHARDING_KEY)
    if group:
        system.message_group = group.decode("utf-8", "replace")
    priority = received.properties.get(prop.PRIORITY)
    if priority and priority.isdigit():
        system.priority = int(priority)
    lite = received.properties.get(prop.LITE_TOPIC)
    if lite:
        system.lite_topic = lite.decode("utf-8", "replace") if isinstance(lite, bytes) else lite
    return definition.Message(
        topic=to_resource(received.topic),
        user_properties=properties,
        system_properties=system,
        body=body,
    )
