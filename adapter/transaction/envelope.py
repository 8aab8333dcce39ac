"""A transactional message in and out of ``RMQ_SYS_TRANS_HALF_TOPIC``, and the check-back.

Reproduces these RocketMQ steps (reference sections 1.2 to 1.7):

- the producer's half message (``sendMessageInTransaction``): the message with ``TRAN_MSG`` =
  ``true`` and ``PGROUP`` = the producer group, its ``UNIQ_KEY`` being the transaction id;
- what ``local_execute`` sees once the half message is stored: the message with its
  transaction id in ``UNIQ_KEY`` and ``__transactionId__``;
- the committed message (``EndTransactionProcessor.endMessageTransaction``): the real topic and
  queue, every property but ``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG``, plus
  ``__transactionId__``, ``PGROUP`` and, when committed through a check,
  ``TRANSACTION_CHECK_TIMES``;
- the check-back (``CHECK_TRANSACTION_STATE``): the half message addressed to its producer
  group with the check count, and the message ``checker_callback`` sees, whose
  ``TRANSACTION_CHECK_TIMES`` says which check this is.

A transactional message cannot be delayed: a delay level or a delivery-time property is refused
(:func:`refuse_delay`), where RocketMQ's clients strip ``DELAY`` (and its broker used to loop on
it, section 1.12).

Known gaps: property values must be UTF-8 text (Avro strings); RocketMQ stores any bytes. A
message's queue is not kept: the half message goes to any queue, as in the Python client. The
message ``local_execute`` and ``checker_callback`` see has the half topic's partition and offset
as its queue id and offset (RocketMQ gives the half queue's offset too); it carries no
``REAL_TOPIC``/``REAL_QID`` properties.
"""

from __future__ import annotations

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import InvalidMessageError
from adapter.message import Headers, Message, ReceivedMessage, text_property
from adapter.records import CheckRequest, HalfMessage
from adapter.schedule.envelope import Delivery

__all__ = [
    "refuse_delay",
    "half_message",
    "committed_delivery",
    "check_request",
    "checked_message",
    "prepared_message",
]

# Properties the envelopes set from the record's own fields; a stale copy in ``properties``
# (a record written by hand, or resumed from the discard topic) never wins over them.
_FROM_FIELDS = frozenset(
    {
        prop.UNIQ_KEY,
        prop.TAGS,
        prop.KEYS,
        prop.TRANSACTION_ID,
        prop.PRODUCER_GROUP,
        prop.TRANSACTION_CHECK_TIMES,
    }
)
# Properties RocketMQ removes from the committed message (REAL_* since ever, TRAN_MSG since 4.6.1).
_NOT_COMMITTED = _FROM_FIELDS | {prop.REAL_TOPIC, prop.REAL_QUEUE_ID, prop.TRANSACTION_PREPARED}


def _text(value: bytes, name: str) -> str:
    return text_property(value, name, "a transactional message")


def refuse_delay(message: Message) -> None:
    """Raise :class:`InvalidMessageError` when ``message`` asks for a later delivery."""
    asked = []
    if message.delay_time_level > 0:
        asked.append(f"delay level {message.delay_time_level}")
    properties = message.properties
    asked += [f"property {name}" for name in prop.DELIVERY_TIME if name in properties]
    if asked:
        raise InvalidMessageError(
            f"a transactional message cannot be delayed (it has {', '.join(asked)}); "
            "send it without a delay, or delay the message it triggers",
            topic=message.topic,
        )


def half_message(message: Message, *, group: str, transaction_id: str, born_ms: int) -> HalfMessage:
    """A producer's transactional message as its half message (``TRAN_MSG``, ``PGROUP`` set)."""
    refuse_delay(message)
    properties = {name: _text(value, name) for name, value in message.properties.items()}
    properties[prop.TRANSACTION_PREPARED] = "true"
    properties[prop.PRODUCER_GROUP] = group
    return HalfMessage(
        transaction_id=transaction_id,
        producer_group=group,
        topic=message.topic,
        queue_id=-1,
        tags=_text(message.tags, prop.TAGS) if message.tags is not None else None,
        keys=_text(message.keys, prop.KEYS) if message.keys is not None else None,
        properties=properties,
        body=message.body,
        born_timestamp=born_ms,
    )


def committed_delivery(half: HalfMessage, *, check_times: int) -> Delivery:
    """The real message a COMMIT of ``half`` produces; ``check_times`` checks had been sent."""
    tid = half.transaction_id.encode()
    headers: list[tuple[str, bytes]] = [(prop.UNIQ_KEY, tid)]
    if half.tags is not None:
        headers.append((prop.TAGS, half.tags.encode()))
    if half.keys is not None:
        headers.append((prop.KEYS, half.keys.encode()))
    headers.extend(
        (name, value.encode())
        for name, value in half.properties.items()
        if name not in _NOT_COMMITTED
    )
    headers.append((prop.TRANSACTION_ID, tid))
    headers.append((prop.PRODUCER_GROUP, half.producer_group.encode()))
    if prop.BORN_TIMESTAMP not in half.properties:
        headers.append((prop.BORN_TIMESTAMP, str(half.born_timestamp).encode()))
    if check_times > 0:
        headers.append((prop.TRANSACTION_CHECK_TIMES, str(check_times).encode()))
    return Delivery(half.topic, half.queue_id, None, half.body, headers)


def check_request(
    half: HalfMessage, *, half_partition: int, half_offset: int, check_times: int, now_ms: int
) -> CheckRequest:
    """The ``check_times``-th check of ``half`` (at ``half_partition``@``half_offset``)."""
    return CheckRequest(
        transaction_id=half.transaction_id,
        producer_group=half.producer_group,
        half_partition=half_partition,
        half_offset=half_offset,
        check_times=check_times,
        topic=half.topic,
        queue_id=half.queue_id,
        tags=half.tags,
        keys=half.keys,
        properties=dict(half.properties),
        body=half.body,
        born_timestamp=half.born_timestamp,
        requested_at=now_ms,
    )


def _received(
    *,
    kafka_topic: str,
    transaction_id: str,
    group: str,
    topic: str,
    tags: str | None,
    keys: str | None,
    properties: dict[str, str],
    body: bytes,
    born_ms: int,
    stored_ms: int,
    queue_id: int,
    queue_offset: int,
    check_times: int | None,
) -> ReceivedMessage:
    tid = transaction_id.encode()
    headers: Headers = [(prop.UNIQ_KEY, tid), (prop.TRANSACTION_ID, tid)]
    if tags is not None:
        headers.append((prop.TAGS, tags.encode()))
    if keys is not None:
        headers.append((prop.KEYS, keys.encode()))
    headers.extend(
        (name, value.encode()) for name, value in properties.items() if name not in _FROM_FIELDS
    )
    headers.append((prop.PRODUCER_GROUP, group.encode()))
    if prop.BORN_TIMESTAMP not in properties:
        headers.append((prop.BORN_TIMESTAMP, str(born_ms).encode()))
    if check_times is not None:
        headers.append((prop.TRANSACTION_CHECK_TIMES, str(check_times).encode()))
    return ReceivedMessage(
        topic=topic,
        kafka_topic=kafka_topic,
        body=body,
        queue_id=queue_id,
        queue_offset=queue_offset,
        timestamp=stored_ms,
        append_time=False,
        headers=headers,
    )


def checked_message(request: CheckRequest) -> ReceivedMessage:
    """What ``checker_callback(msg)`` sees for ``request``: the half message on its real topic,
    with ``TRANSACTION_CHECK_TIMES`` = the check's number; its store time is the request's."""
    return _received(
        kafka_topic=naming.kafka_topic(naming.check_topic(request.producer_group)),
        transaction_id=request.transaction_id,
        group=request.producer_group,
        topic=request.topic,
        tags=request.tags,
        keys=request.keys,
        properties=request.properties,
        body=request.body,
        born_ms=request.born_timestamp,
        stored_ms=request.requested_at,
        queue_id=request.half_partition,
        queue_offset=request.half_offset,
        check_times=request.check_times,
    )


def prepared_message(
    half: HalfMessage, *, half_partition: int, half_offset: int
) -> ReceivedMessage:
    """What ``local_execute(msg, user_args)`` sees once ``half`` is stored at
    ``half_partition``@``half_offset``."""
    return _received(
        kafka_topic=naming.kafka_topic(naming.TRANS_HALF_TOPIC),
        transaction_id=half.transaction_id,
        group=half.producer_group,
        topic=half.topic,
        tags=half.tags,
        keys=half.keys,
        properties=half.properties,
        body=half.body,
        born_ms=half.born_timestamp,
        stored_ms=half.born_timestamp,
        queue_id=half_partition,
        queue_offset=half_offset,
        check_times=None,
    )
