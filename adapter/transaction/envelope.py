"""A transactional message in and out of ``RMQ_SYS_TRANS_HALF_TOPIC``, and the check-back.

Reproduces these RocketMQ steps (``DefaultMQProducerImpl.sendMessageInTransaction``,
``EndTransactionProcessor.endMessageTransaction``, ``checkTransactionState``):

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

import logging
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import InvalidMessageError
from adapter.message import Delivery, Message, ReceivedMessage, text_property
from adapter.wire.records import CheckRequest, EndTransaction, HalfMessage, TransactionDecision

__all__ = [
    "DELIVERED_HEADER",
    "MARK_HEADER",
    "TransactionStatus",
    "end_transaction",
    "decide",
    "decision_of",
    "refuse_delay",
    "half_message",
    "committed_delivery",
    "check_request",
    "checked_message",
    "prepared_message",
]

DELIVERED_HEADER = "rmq.delivered"
"""On an END record: a COMMIT whose real message the producer's own Kafka transaction wrote,
next to it (the fast path); the coordinator only records the decision."""
MARK_HEADER = "rmq.read-mark"
"""On a record of END that is no decision: a mark the coordinator writes at a time of its clock
and reads back, read_committed, before it checks anything due by then."""

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
_NOT_COMMITTED = _FROM_FIELDS | {
    prop.REAL_TOPIC,
    prop.REAL_QUEUE_ID,
    prop.TRANSACTION_PREPARED,
    prop.COPY_STAMP,
    prop.DIRECT_FENCE,
}


log = logging.getLogger(__name__)


class TransactionStatus(IntEnum):
    """``rocketmq.client.TransactionStatus``: what a local transaction or a check returns."""

    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2


_DECISIONS = {
    TransactionStatus.COMMIT: TransactionDecision.COMMIT,
    TransactionStatus.ROLLBACK: TransactionDecision.ROLLBACK,
    TransactionStatus.UNKNOWN: TransactionDecision.UNKNOWN,
}


def decide(
    callback: Callable[..., object], what: str, transaction_id: str, *args: object
) -> TransactionDecision:
    """Run a local transaction or a checker: its result as a decision. An exception is logged
    and counts as UNKNOWN, as RocketMQ's client treats it."""
    try:
        result = callback(*args)
    except Exception:
        log.exception("%s raised for transaction %s; counted as UNKNOWN", what, transaction_id)
        return TransactionDecision.UNKNOWN
    return decision_of(result, what, transaction_id)


def decision_of(result: object, what: str, transaction_id: str) -> TransactionDecision:
    """A callback's result as a decision: a TransactionStatus or its int, else UNKNOWN (logged,
    as RocketMQ's client treats anything else as unknown)."""
    if isinstance(result, int) and not isinstance(result, bool) and 0 <= result <= 2:
        return _DECISIONS[TransactionStatus(result)]
    log.warning(
        "%s for transaction %s returned %r, not a TransactionStatus; counted as UNKNOWN",
        what,
        transaction_id,
        result,
    )
    return TransactionDecision.UNKNOWN


def _names(of: HalfMessage | CheckRequest, half_partition: int, half_offset: int) -> dict[str, Any]:
    """The fields by which a record names a half message (RocketMQ's END_TRANSACTION header:
    transaction id, producer group, commit-log offset)."""
    return {
        "transaction_id": of.transaction_id,
        "producer_group": of.producer_group,
        "half_partition": half_partition,
        "half_offset": half_offset,
    }


def end_transaction(
    of: HalfMessage | CheckRequest,
    decision: TransactionDecision,
    half_at: tuple[int, int],
    check_times: int,
    now_ms: int,
) -> EndTransaction:
    """The END record deciding ``of``, stored at ``half_at`` (partition, offset) of HALF: the
    producer's own (``check_times`` 0) or its answer to check number ``check_times``."""
    return EndTransaction(
        **_names(of, *half_at),
        decision=decision,
        from_check=check_times > 0,
        check_times=check_times,
        remark=None,
        timestamp=now_ms,
    )


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


def _headers(
    source: HalfMessage | CheckRequest, *, omit: frozenset[str], check_times: int | None
) -> prop.Headers:
    """A transactional message's headers: its identity and properties, the transaction id and
    producer group, and ``TRANSACTION_CHECK_TIMES`` when a check is involved."""
    extra = [(prop.TRANSACTION_ID, source.transaction_id)]
    extra.append((prop.PRODUCER_GROUP, source.producer_group))
    if check_times is not None:
        extra.append((prop.TRANSACTION_CHECK_TIMES, str(check_times)))
    return prop.message_headers(
        source.transaction_id, source.tags, source.keys, source.properties,
        omit=omit, born_ms=source.born_timestamp, extra=extra,
    )  # fmt: skip


def committed_delivery(half: HalfMessage, *, check_times: int) -> Delivery:
    """The real message a COMMIT of ``half`` produces; ``check_times`` checks had been sent."""
    headers = _headers(half, omit=_NOT_COMMITTED, check_times=check_times or None)
    return Delivery(half.topic, half.queue_id, None, half.body, headers)


def check_request(
    half: HalfMessage, *, half_partition: int, half_offset: int, check_times: int, now_ms: int
) -> CheckRequest:
    """The ``check_times``-th check of ``half`` (at ``half_partition``@``half_offset``)."""
    return CheckRequest(
        **_names(half, half_partition, half_offset),
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
    source: HalfMessage | CheckRequest,
    *,
    kafka_topic: str,
    stored_ms: int,
    queue_id: int,
    queue_offset: int,
    check_times: int | None,
) -> ReceivedMessage:
    return ReceivedMessage(
        topic=source.topic,
        kafka_topic=kafka_topic,
        body=source.body,
        queue_id=queue_id,
        queue_offset=queue_offset,
        timestamp=stored_ms,
        append_time=False,
        headers=_headers(source, omit=_FROM_FIELDS, check_times=check_times),
    )


def checked_message(request: CheckRequest) -> ReceivedMessage:
    """What ``checker_callback(msg)`` sees for ``request``: the half message on its real topic,
    with ``TRANSACTION_CHECK_TIMES`` = the check's number; its store time is the request's."""
    return _received(
        request,
        kafka_topic=naming.kafka_topic(naming.check_topic(request.producer_group)),
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
        half,
        kafka_topic=naming.kafka_topic(naming.TRANS_HALF_TOPIC),
        stored_ms=half.born_timestamp,
        queue_id=half_partition,
        queue_offset=half_offset,
        check_times=None,
    )
