"""A message in and out of ``SCHEDULE_TOPIC_XXXX``: RocketMQ's delay hook and ``messageTimeUp``.

Reproduces three RocketMQ steps:

- the put-time delay hook (``HookUtils.handleScheduleMessage``): the message is parked with its
  real topic and queue (``REAL_TOPIC``, ``REAL_QID``) and its level;
- the consumer send-back (``consumerSendMsgBack``): a copy goes to ``%RETRY%<group>`` with
  ``RECONSUME_TIME`` + 1, ``RETRY_TOPIC`` (the original topic) and ``ORIGIN_MESSAGE_ID``, and
  past ``maxReconsumeTimes`` to ``%DLQ%<group>``;
- delivery (``messageTimeUp``): topic, queue, key, properties and body are restored, ``DELAY``
  is dropped, ``UNIQ_KEY`` is kept (a retried message keeps its id, as in RocketMQ), and
  ``REAL_TOPIC`` / ``REAL_QID`` stay on the delivered message as properties.

Known gaps: a delayed message's property values must be UTF-8 text (Avro strings); RocketMQ
stores any bytes. A send-back carries other bytes reversibly (:mod:`adapter.property_bytes`).
"""

from __future__ import annotations

from adapter import properties as prop
from adapter import property_bytes
from adapter.message import Delivery, Message, ReceivedMessage, text_property
from adapter.wire.records import ScheduledMessage

# Properties carried in their own fields, or set afresh on delivery.
_FIELDS = frozenset({prop.UNIQ_KEY, prop.TAGS, prop.KEYS, prop.DELAY, prop.RECONSUME_TIME})
# Properties a send-back must not carry over (RocketMQ clears TRAN_MSG; the rest is re-set).
_NOT_SENT_BACK = _FIELDS | {prop.TRANSACTION_PREPARED, prop.REAL_TOPIC, prop.REAL_QUEUE_ID}


def _text(value: bytes, name: str) -> str:
    return text_property(value, name, "a delayed message")


def scheduled(
    message: Message,
    *,
    level: int,
    unique_key: str,
    born_ms: int,
    queue_id: int = -1,
    key: bytes | None = None,
) -> ScheduledMessage:
    """A producer's delayed message, to park on ``SCHEDULE_TOPIC_XXXX`` partition level - 1."""
    return ScheduledMessage(
        level=level,
        topic=message.topic,
        queue_id=queue_id,
        key=key,
        tags=_text(message.tags, prop.TAGS) if message.tags is not None else None,
        keys=_text(message.keys, prop.KEYS) if message.keys is not None else None,
        properties={name: _text(v, name) for name, v in message.properties.items()},
        body=message.body,
        born_timestamp=born_ms,
        unique_key=unique_key,
    )


def sent_back(
    message: ReceivedMessage, *, to_topic: str, level: int, max_reconsume_times: int
) -> ScheduledMessage:
    """A failed message's copy for ``%RETRY%<group>`` (or, with level 0, ``%DLQ%<group>``).

    Any header bytes go back: a value that is not UTF-8 (a foreign writer's; the record holds
    text) travels as ``rmq.bytes.<name>`` in base64, which the consumer restores
    (:mod:`adapter.property_bytes`)."""
    props = message.properties
    properties = dict(
        property_bytes.as_text(name, value)
        for name, value in props.items()
        if name not in _NOT_SENT_BACK
    )
    fields: dict[str, str | None] = {}
    for name in (prop.UNIQ_KEY, prop.TAGS, prop.KEYS):
        raw = props.get(name)
        carried, text = property_bytes.as_text(name, raw) if raw else (name, None)
        if carried != name:
            properties[carried], text = text or "", None
        fields[name] = text
    properties.setdefault(prop.RETRY_TOPIC, message.topic)
    properties.setdefault(prop.ORIGIN_MESSAGE_ID, message.id)
    properties[prop.MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    properties[prop.BORN_TIMESTAMP] = str(message.born_timestamp)
    return ScheduledMessage(
        level=level,
        topic=to_topic,
        queue_id=-1,
        key=None,
        tags=fields[prop.TAGS],
        keys=fields[prop.KEYS],
        properties=properties,
        body=message.body,
        born_timestamp=message.born_timestamp,
        unique_key=fields[prop.UNIQ_KEY] or message.id,
        reconsume_times=message.reconsume_times + 1,
    )


def delivered(record: ScheduledMessage) -> Delivery:
    """The real message a due ``ScheduledMessage`` turns back into."""
    extra = [(prop.RECONSUME_TIME, str(record.reconsume_times))] if record.reconsume_times else []
    extra += [(prop.REAL_TOPIC, record.topic), (prop.REAL_QUEUE_ID, str(record.queue_id))]
    headers = prop.message_headers(
        record.unique_key, record.tags, record.keys, record.properties,
        omit=_FIELDS, born_ms=record.born_timestamp, extra=extra,
    )  # fmt: skip
    return Delivery(record.topic, record.queue_id, record.key, record.body, headers)
