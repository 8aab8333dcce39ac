"""``Message``: the 5.x message, its checks, and its form on the wire (the 2.0 headers).

Reproduces ``rocketmq.v5.model.Message`` of rocketmq-python-client 5.1: an empty constructor,
then properties with setters (``topic``, ``body``, ``tag``, ``keys``, ``message_group``,
``delivery_timestamp``, ``priority``, ``lite_topic``) and ``add_property(key, value)``; the
setters refuse what the 5.x setters refuse, with the same rules (a topic matching
``^[%a-zA-Z0-9_-]+$``, a tag without ``|``, no blank key or property, a priority of 0 or more,
and no two of ``message_group``, ``delivery_timestamp``, ``lite_topic`` and a priority above 0
together).
Assigning ``keys`` adds to the keys, as in 5.x. ``send`` sets ``message_id`` and
``message_type`` (1 NORMAL, 2 FIFO, 3 DELAY, 4 TRANSACTION, 5 LITE, 6 PRIORITY), as the 5.x
producer does.

On Kafka a 5.x message is the same record as a 2.0 one (:mod:`adapter.properties`): the body
is the value; ``UNIQ_KEY`` (the message id), ``TAGS``, ``KEYS`` (space-separated) and the
user properties are headers; ``message_group`` is the ``__SHARDINGKEY`` property, as the 5.x
proxy stores it; ``priority`` is the ``__PRIORITY`` property, and the message goes to its
priority's band (:mod:`adapter.priorities`); ``lite_topic`` is the ``__LITE_TOPIC`` property and
the record's key, so one lite topic's messages share a queue, in order
(:mod:`adapter.v5.lite_push_consumer`). So 2.0 consumers, plain Kafka readers and Spark
read it unchanged.

``delivery_timestamp`` becomes whole epoch milliseconds at the setter: a value under 10^11 is
seconds (5.x sends seconds), a fraction is rounded up (never early); a bool, a value that is
not positive and finite, or one in micro- or nanoseconds is refused there. 5.x puts the value
into a protobuf ``Timestamp`` and fails at send on a float; here ``time.time() + 10`` works.
A received timer message has its ``delivery_timestamp`` (from ``TIMER_DELIVER_MS``).

Known gaps: a ``priority`` that is not an
int (or is a bool) is refused at the setter, where 5.x fails at send. Properties named like the
system's (``UNIQ_KEY``, ``TAGS``, ``__SHARDINGKEY``, ``__PRIORITY``, ``TIMER_DELIVER_MS``, ...)
are refused at send, where 5.x lets the broker decide. ``keys`` returns a copy of the set (5.x
returns its own); ``keys`` keep the order they were added in on the wire. The body must be
bytes (5.x accepts anything and fails later in protobuf).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from enum import IntEnum
from typing import Any

from adapter import message as wire
from adapter import naming
from adapter import properties as prop
from adapter.exceptions import InvalidNameError
from adapter.v5.delivery_time import epoch_ms
from adapter.v5.exception import IllegalArgumentException

__all__ = ["Message", "MessageType"]

_TOPIC_CHARACTERS = "^[%a-zA-Z0-9_-]+$"
_SYSTEM_PROPERTIES = prop.RESERVED | {
    prop.SHARDING_KEY, prop.TIMER_DELIVER_MS, prop.PRIORITY, prop.LITE_TOPIC,
}  # fmt: skip
_KEY_SEPARATOR = " "


class MessageType(IntEnum):
    """The 5.x protocol's ``MessageType`` values that ``Message.message_type`` takes."""

    MESSAGE_TYPE_UNSPECIFIED = 0
    NORMAL = 1
    FIFO = 2
    DELAY = 3
    TRANSACTION = 4
    LITE = 5
    PRIORITY = 6


def _together(first: str, second: str) -> IllegalArgumentException:
    return IllegalArgumentException(f"{first} and {second} should not be set at same time.")


def _blank(text: object) -> bool:
    return not isinstance(text, str) or not text.strip()


def _valid_topic(topic: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in "%_-") for c in topic)


class Message:
    """A message to send (or, for a ``TransactionChecker``, one being checked)."""

    __slots__ = (
        "_topic",
        "_body",
        "_tag",
        "_keys",
        "_message_group",
        "_delivery_timestamp",
        "_priority",
        "_lite_topic",
        "_properties",
        "_message_id",
        "_message_type",
        "_born_timestamp",
        "_born_host",
        "_store_timestamp",
        "_delivery_attempt",
        "_receipt_handle",
        "_namespace",
    )

    def __init__(self) -> None:
        self._topic: str | None = None
        self._body: bytes | None = None
        self._tag: str | None = None
        self._keys: dict[str, None] = {}  # an ordered set
        self._message_group: str | None = None
        self._delivery_timestamp: int | None = None
        self._priority: int | None = None
        self._lite_topic: str | None = None
        self._properties: dict[str, str] = {}
        self._message_id: str | None = None
        self._message_type: int | None = None
        self._born_timestamp: int | None = None
        self._born_host: str | None = None
        self._store_timestamp: int | None = None
        self._delivery_attempt: int | None = None
        self._receipt_handle: str | None = None
        self._namespace = ""

    # -- what the application sets ------------------------------------------------------------

    @property
    def topic(self) -> str | None:
        return self._topic

    @topic.setter
    def topic(self, topic: str) -> None:
        if _blank(topic):
            raise IllegalArgumentException("topic has not been set yet.")
        if not _valid_topic(topic):
            raise IllegalArgumentException(
                f"topic {topic!r} does not match the regex [regex={_TOPIC_CHARACTERS}]."
            )
        self._topic = topic

    @property
    def body(self) -> bytes | None:
        return self._body

    @body.setter
    def body(self, body: bytes) -> None:
        if not body:
            raise IllegalArgumentException("body should not be blank.")
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise IllegalArgumentException(
                f"body must be bytes, got {type(body).__name__} (encode text first)"
            )
        self._body = bytes(body)

    @property
    def tag(self) -> str | None:
        return self._tag

    @tag.setter
    def tag(self, tag: str) -> None:
        if _blank(tag):
            raise IllegalArgumentException("tag should not be blank.")
        if "|" in tag:
            raise IllegalArgumentException('tag should not contain "|".')
        self._tag = tag

    @property
    def keys(self) -> set[str]:
        """The message's keys (a copy); assigning a key, or several, adds them."""
        return set(self._keys)

    @keys.setter
    def keys(self, keys: str | Iterable[str]) -> None:
        added = [keys] if isinstance(keys, str) else list(keys)
        for key in added:
            if _blank(key):
                raise IllegalArgumentException("key should not be blank.")
        self._keys.update(dict.fromkeys(added))

    @property
    def message_group(self) -> str | None:
        """The FIFO group: one group's messages go to one queue, in order."""
        return self._message_group

    @message_group.setter
    def message_group(self, message_group: str) -> None:
        if _blank(message_group):
            raise IllegalArgumentException("message_group should not be blank.")
        if self._delivery_timestamp:
            raise _together("message_group", "delivery_timestamp")
        if self._priority:
            raise _together("message_group", "priority")
        if self._lite_topic:
            raise _together("message_group", "lite_topic")
        self._message_group = message_group

    @property
    def delivery_timestamp(self) -> int | None:
        """When to deliver, epoch milliseconds (whole: a value set in seconds, or with a
        fraction, reads back in whole milliseconds, rounded up)."""
        return self._delivery_timestamp

    @delivery_timestamp.setter
    def delivery_timestamp(self, delivery_timestamp: float | None) -> None:
        if self._message_group:
            raise _together("delivery_timestamp", "message_group")
        if self._priority:
            raise _together("delivery_timestamp", "priority")
        if self._lite_topic:
            raise _together("delivery_timestamp", "lite_topic")
        self._delivery_timestamp = (
            None if delivery_timestamp is None else epoch_ms(delivery_timestamp)
        )

    @property
    def properties(self) -> dict[str, str]:
        """The user properties (the message's own dict, as in 5.x)."""
        return self._properties

    def add_property(self, key: str, value: str) -> None:
        if _blank(key):
            raise IllegalArgumentException("key should not be blank.")
        if _blank(value):
            raise IllegalArgumentException("value should not be blank.")
        self._properties[key] = value

    # -- what sending (or the broker) sets ------------------------------------------------------

    @property
    def message_id(self) -> str | None:
        return self._message_id

    @message_id.setter
    def message_id(self, message_id: str | None) -> None:
        self._message_id = message_id

    @property
    def message_type(self) -> int | None:
        return self._message_type

    @message_type.setter
    def message_type(self, message_type: int | None) -> None:
        self._message_type = message_type

    @property
    def born_timestamp(self) -> int | None:
        return self._born_timestamp

    @property
    def born_host(self) -> str | None:
        return self._born_host

    @property
    def store_timestamp(self) -> int | None:
        return self._store_timestamp

    @property
    def delivery_attempt(self) -> int | None:
        return self._delivery_attempt

    @property
    def receipt_handle(self) -> str | None:
        """The handle ``ack`` and ``change_invisible_duration`` name this delivery by."""
        return self._receipt_handle

    @receipt_handle.setter
    def receipt_handle(self, receipt_handle: str | None) -> None:
        self._receipt_handle = receipt_handle

    @property
    def namespace(self) -> str:
        """The namespace of a received message's topic (``""`` for none)."""
        return self._namespace

    @property
    def lite_topic(self) -> str | None:
        """The lite topic of the parent ``topic`` (RIP-83) the message goes to."""
        return self._lite_topic

    @lite_topic.setter
    def lite_topic(self, lite_topic: str) -> None:
        if _blank(lite_topic):
            raise IllegalArgumentException("lite_topic has not been set yet.")
        for other in ("message_group", "delivery_timestamp", "priority"):
            if getattr(self, f"_{other}"):
                raise _together("lite_topic", other)
        try:
            naming.validate_lite_topic(lite_topic)
        except InvalidNameError as exc:
            raise IllegalArgumentException(str(exc)) from exc
        self._lite_topic = lite_topic

    @property
    def priority(self) -> int | None:
        """The priority (0 or more; higher is received first from a backlog of a topic made
        for priorities); ``None`` for none."""
        return self._priority

    @priority.setter
    def priority(self, priority: int) -> None:
        if isinstance(priority, bool) or not isinstance(priority, numbers.Integral):
            raise IllegalArgumentException(
                f"priority must be a whole number, got {type(priority).__name__}"
            )
        if priority < 0:
            raise IllegalArgumentException("priority must be greater than or equal to 0.")
        if self._delivery_timestamp:
            raise _together("priority", "delivery_timestamp")
        if self._message_group:
            raise _together("priority", "message_group")
        if self._lite_topic:
            raise _together("priority", "lite_topic")
        self._priority = int(priority)

    @property
    def corrupted(self) -> bool:
        return False

    @staticmethod
    def message_type_desc(message_type: int) -> str:
        try:
            kind = MessageType(message_type)
        except ValueError:
            return "MESSAGE_TYPE_UNSPECIFIED"
        return kind.name

    def __str__(self) -> str:
        return (
            f"topic:{self._topic}, tag:{self._tag}, message_group:{self._message_group}, "
            f"lite_topic:{self._lite_topic}, priority:{self._priority}, "
            f"delivery_timestamp:{self._delivery_timestamp}, keys:{set(self._keys)}, "
            f"properties:{self._properties}"
        )

    def __repr__(self) -> str:
        return f"<Message topic={self._topic!r} id={self._message_id!r} tag={self._tag!r}>"

    # -- the adapter's side -----------------------------------------------------------------------

    def type_for_send(self, *, transactional: bool, max_body_size: int) -> MessageType:
        """The message's type once checked for sending; ``IllegalArgumentException`` naming the
        rule it breaks."""
        if self._topic is None:
            raise IllegalArgumentException("message topic has not been set yet.")
        try:
            naming.sendable_kafka_topic(self._topic)
        except InvalidNameError as exc:
            raise IllegalArgumentException(str(exc)) from exc
        if not self._body:
            raise IllegalArgumentException("message body is none.")
        if len(self._body) > max_body_size:
            raise IllegalArgumentException(
                f"Message body size exceeds the threshold, max size={max_body_size} bytes, "
                f"got {len(self._body)} bytes"
            )
        for name in self._properties:
            if name in prop.NOT_FOR_USERS:
                raise IllegalArgumentException(
                    f"property {name!r} is used by the system, use another name"
                )
        if transactional and (
            self._message_group or self._delivery_timestamp or self._priority is not None
            or self._lite_topic
        ):  # fmt: skip
            raise IllegalArgumentException(
                "transactional message should not set message_group, delivery_timestamp, "
                "lite and priority"
            )
        if transactional:
            return MessageType.TRANSACTION
        if self._message_group:
            return MessageType.FIFO
        if self._delivery_timestamp:
            return MessageType.DELAY
        if self._priority is not None:
            return MessageType.PRIORITY
        if self._lite_topic:
            return MessageType.LITE
        return MessageType.NORMAL

    def to_wire(self, namespace: str = "") -> wire.Message:
        """The 2.0 message the shared send core sends (checked by :meth:`type_for_send`), to
        its topic in ``namespace``."""
        if self._topic is None or self._body is None:
            raise IllegalArgumentException("a message needs a topic and a body to be sent")
        out = wire.Message(naming.with_namespace(namespace, self._topic))
        out.set_body(self._body)
        if self._tag is not None:
            out.set_tags(self._tag)
        if self._keys:
            out.set_keys(_KEY_SEPARATOR.join(self._keys))
        for name, value in self._properties.items():
            out.set_property(name, value)
        if self._message_group is not None:
            out.put_property(prop.SHARDING_KEY, self._message_group)
        if self._priority is not None:
            out.put_property(prop.PRIORITY, str(self._priority))
        if self._lite_topic is not None:
            out.put_property(prop.LITE_TOPIC, self._lite_topic)
        return out

    @classmethod
    def from_received(
        cls,
        received: wire.ReceivedMessage,
        *,
        delivery_attempt: int | None = None,
        receipt_handle: str | None = None,
    ) -> Message:
        """The 5.x view of a consumed (or checked) 2.0 message: system properties become
        fields, the rest stay user properties."""
        message = cls()
        message._delivery_attempt = delivery_attempt
        message._receipt_handle = receipt_handle
        message._namespace, message._topic = naming.split_namespace(received.topic)
        message._body = received.body
        message._message_id = received.id
        message._born_timestamp = received.born_timestamp
        message._store_timestamp = received.store_timestamp
        found: dict[str, Any] = received.properties
        if received.tags:
            message._tag = _text(received.tags)
        if received.keys:
            keys = _text(received.keys).split(_KEY_SEPARATOR)
            message._keys = dict.fromkeys(key for key in keys if key)
        group = found.get(prop.SHARDING_KEY)
        if group:
            message._message_group = _text(group)
        deliver = found.get(prop.TIMER_DELIVER_MS)
        if deliver and _text(deliver).isdigit():
            message._delivery_timestamp = int(_text(deliver))
        priority = found.get(prop.PRIORITY)
        if priority and _text(priority).isdigit():
            message._priority = int(_text(priority))
        lite = found.get(prop.LITE_TOPIC)
        if lite:
            message._lite_topic = _text(lite)
        message._properties = {
            name: _text(value) for name, value in found.items() if name not in _SYSTEM_PROPERTIES
        }
        return message


def _text(value: bytes | str) -> str:
    if isinstance(value, str):
        return value
    return value.decode("utf-8", errors="backslashreplace")
