"""``Message`` (what a producer sends) and ``ReceivedMessage`` (what a callback sees).

Reproduces ``rocketmq.client.Message`` and ``rocketmq.client.ReceivedMessage`` of
rocketmq-client-python 2.0: the same setters and read-only properties, with ``tags``,
``keys``, ``body`` and ``get_property`` returning ``bytes`` and ``topic`` and ``id`` returning
``str``, as the original does. On Kafka, the body is the record value and every property
(``TAGS``, ``KEYS``, ``UNIQ_KEY``, user properties) is a record header.

Known gaps: ``store_size``, ``commit_log_offset`` and ``prepared_transaction_offset`` have no
Kafka counterpart; they are approximated (record size, Kafka offset, 0). ``store_timestamp``
is the broker's append time only on topics with ``message.timestamp.type=LogAppendTime``; on
``CreateTime`` topics it equals ``born_timestamp``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import InvalidMessageError
from adapter.msgid import new_message_id

ReceivedHeaders = Sequence[tuple[str, str | bytes | None]]
"""Headers as a consumer reads them (a header value may be ``None``)."""


def _to_bytes(value: str | bytes | bytearray) -> bytes:
    kind = type(value)
    if kind is bytes:
        return value  # type: ignore[return-value]
    if kind is str:
        return value.encode("utf-8")  # type: ignore[union-attr]
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise InvalidMessageError(f"expected str or bytes, got {type(value).__name__}")


def _to_str(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def text_property(value: bytes, name: str, carrier: str) -> str:
    """A property as text, for a system record (Avro strings); ``carrier`` names the kind of
    message in the error (RocketMQ stores any bytes, the adapter's records hold text)."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidMessageError(
            f"property {name!r} is not UTF-8 text; {carrier} carries text properties"
        ) from None


class Message:
    """A message to send: ``Message(topic)`` then the setters, as in ``rocketmq.client``."""

    __slots__ = ("_topic", "_keys", "_tags", "_body", "_properties", "_delay_level", "_unique_key")

    def __init__(self, topic: str | bytes) -> None:
        self._topic = _to_str(topic)
        self._keys: bytes | None = None
        self._tags: bytes | None = None
        self._body = b""
        self._properties: dict[str, bytes] = {}
        self._delay_level = 0
        self._unique_key: str | None = None

    def set_keys(self, keys: str | bytes | Iterable[str]) -> None:
        """Business keys, space separated as in RocketMQ (a list is joined with spaces)."""
        if not isinstance(keys, (str, bytes, bytearray)):
            keys = " ".join(keys)
        self._keys = _to_bytes(keys) or None

    def set_tags(self, tags: str | bytes) -> None:
        self._tags = _to_bytes(tags) or None

    def set_body(self, body: str | bytes) -> None:
        self._body = _to_bytes(body)

    def set_property(self, key: str | bytes, value: str | bytes) -> None:
        """A user property; a blank name or one RocketMQ keeps for itself
        (:data:`~adapter.properties.NOT_FOR_USERS`) is refused, as ``putUserProperty``
        refuses them."""
        name = _to_str(key)
        if not name.strip():
            raise InvalidMessageError("The name of property can not be null or blank string!")
        if name in prop.NOT_FOR_USERS:
            raise InvalidMessageError(
                f"The Property<{name}> is used by system, input another please"
            )
        self._properties[name] = _to_bytes(value)

    def put_property(self, name: str, value: str | bytes) -> None:
        """A property the adapter sets itself (``__SHARDINGKEY`` of a FIFO group, say), not
        checked: RocketMQ's ``putProperty`` beside ``putUserProperty``."""
        self._properties[name] = _to_bytes(value)

    def set_delay_time_level(self, delay_time_level: int) -> None:
        """RocketMQ delay level; ``<= 0`` means no delay."""
        if isinstance(delay_time_level, bool) or not isinstance(delay_time_level, int):
            raise InvalidMessageError(f"delay level must be an int, got {delay_time_level!r}")
        self._delay_level = delay_time_level

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def keys(self) -> bytes | None:
        return self._keys

    @property
    def tags(self) -> bytes | None:
        return self._tags

    @property
    def body(self) -> bytes:
        return self._body

    @property
    def properties(self) -> dict[str, bytes]:
        """User properties (a copy)."""
        return dict(self._properties)

    @property
    def delay_time_level(self) -> int:
        return self._delay_level

    def unique_key(self) -> str:
        """The message's ``UNIQ_KEY``: made at its first send and kept, as RocketMQ's
        ``MessageClientIDSetter.setUniqID`` keeps the id a message has. An application that
        sends the same message again (after a timeout, say: Kafka may have written it) sends
        the same message id, which consumers and the Spark ledger can merge."""
        key = self._unique_key
        if key is None:
            key = self._unique_key = new_message_id()
        return key

    def headers(self, msg_id: str) -> prop.Headers:
        """Kafka headers for this message: ``UNIQ_KEY``, ``TAGS``, ``KEYS`` and user properties."""
        return prop.message_headers(
            msg_id, tags=self._tags, keys=self._keys, properties=self._properties
        )

    def __repr__(self) -> str:
        return f"<Message topic={self._topic!r} tags={self._tags!r} body={self._body[:40]!r}>"


@dataclass(frozen=True, slots=True)
class Delivery:
    """A record for a real topic, as a worker or a send-back writes it."""

    topic: str
    """The RocketMQ topic name (not yet escaped for Kafka)."""
    queue_id: int
    """The partition, or -1 for any."""
    key: bytes | None
    value: bytes
    headers: prop.Headers


class ReceivedMessage:
    """A consumed message, read-only, with the properties of ``rocketmq.client.ReceivedMessage``."""

    __slots__ = (
        "_topic",
        "_kafka_topic",
        "_body",
        "_queue_id",
        "_queue_offset",
        "_timestamp",
        "_append_time",
        "_props",
        "_reconsume_extra",
    )

    def __init__(
        self,
        *,
        topic: str,
        kafka_topic: str,
        body: bytes | None,
        queue_id: int,
        queue_offset: int,
        timestamp: int,
        append_time: bool,
        headers: ReceivedHeaders | None,
        earlier_deliveries: int = 0,
    ) -> None:
        """``earlier_deliveries``: failed deliveries Kafka counted but ``RECONSUME_TIME`` does
        not show (a share group's delivery count), added to ``reconsume_times``."""
        self._topic = topic
        self._kafka_topic = kafka_topic
        self._body = body if body is not None else b""
        self._queue_id = queue_id
        self._queue_offset = queue_offset
        self._timestamp = timestamp
        self._append_time = append_time
        # Header values are bytes, or None for a null header (kept out: "absent" reads b"").
        props = dict(headers) if headers else {}
        if None in props.values():
            props = {k: v for k, v in props.items() if v is not None}
        self._props: dict[str, bytes] = props  # type: ignore[assignment]
        self._reconsume_extra = max(earlier_deliveries, 0)

    @property
    def topic(self) -> str:
        """The RocketMQ topic; for a message read from a retry topic, its original topic
        (``RETRY_TOPIC``), as RocketMQ's ``resetRetryAndNamespace`` does. A ``RETRY_TOPIC`` on
        any other topic is an ordinary property (a foreign writer's, say) and renames nothing."""
        retry = self._props.get(prop.RETRY_TOPIC)
        if retry and naming.is_retry_topic(self._topic):
            return _received_text(retry)
        return self._topic

    @property
    def tags(self) -> bytes:
        return self._props.get(prop.TAGS, b"")

    @property
    def keys(self) -> bytes:
        return self._props.get(prop.KEYS, b"")

    @property
    def body(self) -> bytes:
        return self._body

    @property
    def id(self) -> str:
        """The message's UNIQ_KEY; for records written without one, ``topic-queue@offset``."""
        uniq = self._props.get(prop.UNIQ_KEY)
        if uniq:
            return _received_text(uniq)
        return f"{self._kafka_topic}-{self._queue_id}@{self._queue_offset}"

    @property
    def delay_time_level(self) -> int:
        return _int_property(self._props.get(prop.DELAY))

    @property
    def queue_id(self) -> int:
        return self._queue_id

    @property
    def queue_offset(self) -> int:
        return self._queue_offset

    @property
    def reconsume_times(self) -> int:
        counted = _int_property(self._props.get(prop.RECONSUME_TIME))
        return max(counted, 0) + self._reconsume_extra

    @property
    def born_timestamp(self) -> int:
        born = self._props.get(prop.BORN_TIMESTAMP)
        if born:
            return _int_property(born)
        return self._timestamp

    @property
    def store_timestamp(self) -> int:
        return self._timestamp

    @property
    def store_size(self) -> int:
        return len(self._body) + sum(len(k) + len(v) for k, v in self._props.items())

    @property
    def commit_log_offset(self) -> int:
        return self._queue_offset

    @property
    def prepared_transaction_offset(self) -> int:
        return 0

    @property
    def kafka_topic(self) -> str:
        """The Kafka topic the record was read from (adapter extension)."""
        return self._kafka_topic

    @property
    def properties(self) -> dict[str, bytes]:
        """Every property, system ones included (adapter extension; a copy)."""
        return dict(self._props)

    def get_property(self, prop_name: str | bytes | prop.MessageProperty) -> bytes:
        """The property's value as bytes, ``b""`` when absent, as the original returns."""
        if isinstance(prop_name, prop.MessageProperty):
            name = prop_name.value
        else:
            name = _to_str(prop_name)
        return self._props.get(name, b"")

    def __getitem__(self, key: str | bytes | prop.MessageProperty) -> bytes:
        return self.get_property(key)

    def __str__(self) -> str:
        return self._body.decode("utf-8")

    def __bytes__(self) -> bytes:
        return self._body

    def __repr__(self) -> str:
        return f"<ReceivedMessage topic={self.topic!r} id={self.id!r} body={self._body!r}>"

    def _count_local_retry(self) -> None:
        self._reconsume_extra += 1


def _received_text(raw: bytes) -> str:
    """A received property as text. RocketMQ's properties are Java strings; bytes that are not
    UTF-8 (a foreign writer's) keep their undecodable bytes as ``\\xNN`` escapes instead of
    failing every accessor, so the message can still be consumed, retried or dead-lettered."""
    return raw.decode("utf-8", errors="backslashreplace")


def _int_property(raw: Any) -> int:
    if not raw:
        return 0
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0
