"""RocketMQ's property names, as Kafka header keys.

Reproduces ``MessageConst`` (the keys below are RocketMQ's own strings) and the
``rocketmq.consts.MessageProperty`` enum of rocketmq-client-python 2.0. On a real topic every
property travels as a Kafka header of the same name with a UTF-8 value, so plain Kafka
consumers and Spark read them without the adapter.

Known gaps: none of RocketMQ's region, trace or pop-checkpoint properties are produced.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum

KEYS = "KEYS"
TAGS = "TAGS"
DELAY = "DELAY"
UNIQ_KEY = "UNIQ_KEY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
COPY_STAMP = "rmq.copy_stamp"
"""On a half message only: what makes two of its copies one send, where its born time cannot
(a client that retries through another proxy; see ``adapter.proxy.handles``). Never delivered."""
DIRECT_FENCE = "rmq.direct_fence_ms"
"""On a half message only: its producer may commit it directly (one append to its queue,
:mod:`adapter.transaction.direct`), and such an append lands and is readable within this many
ms of its born time. Never delivered."""
PRODUCER_GROUP = "PGROUP"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
TRANSACTION_ID = "__transactionId__"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
SHARDING_KEY = "__SHARDINGKEY"
PRIORITY = "__PRIORITY"
"""A 5.x priority message's priority (RIP-80), a whole number from 0 (the adapter's name)."""
LITE_TOPIC = "__LITE_TOPIC"
"""A 5.x lite message's lite topic (RIP-83) under its parent topic (the adapter's name)."""
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
START_DELIVER_TIME = "__STARTDELIVERTIME"

DELIVERY_TIME = (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, START_DELIVER_TIME)
"""Properties that ask for a later delivery (RocketMQ 5 timer messages, legacy Aliyun clients)."""

RESERVED = frozenset(
    {
        KEYS,
        TAGS,
        DELAY,
        UNIQ_KEY,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QUEUE_ID,
        TRANSACTION_PREPARED,
        PRODUCER_GROUP,
        ORIGIN_MESSAGE_ID,
        RECONSUME_TIME,
        MAX_RECONSUME_TIMES,
        TRANSACTION_ID,
        TRANSACTION_CHECK_TIMES,
        BORN_TIMESTAMP,
    }
)
"""System properties the adapter sets itself on a message it sends."""

ROCKETMQ_SYSTEM = frozenset(
    {
        "TRACE_ON",
        "MSG_REGION",
        KEYS,
        TAGS,
        "WAIT",
        DELAY,
        RETRY_TOPIC,
        REAL_TOPIC,
        REAL_QUEUE_ID,
        TRANSACTION_PREPARED,
        PRODUCER_GROUP,
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        ORIGIN_MESSAGE_ID,
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        RECONSUME_TIME,
        UNIQ_KEY,
        MAX_RECONSUME_TIMES,
        "CONSUME_START_TIME",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET",
        TIMER_DELAY_MS,
        TIMER_DELAY_SEC,
        TIMER_DELIVER_MS,
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DEL_MS",
        "TIMER_DELAY_LEVEL",
        "__BORNHOST",
        BORN_TIMESTAMP,
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#",
    }
)
"""RocketMQ's ``MessageConst.STRING_HASH_SET`` (5.x): the names ``putUserProperty`` refuses
and the 5.x proxy rejects as user properties (``ILLEGAL_MESSAGE_PROPERTY_KEY``)."""

NOT_FOR_USERS = (
    ROCKETMQ_SYSTEM
    | RESERVED
    | {
        SHARDING_KEY,
        PRIORITY,
        LITE_TOPIC,
        START_DELIVER_TIME,
        COPY_STAMP,
        DIRECT_FENCE,
    }
)
"""Names an application may not give a property of its own: RocketMQ's system names, those
the adapter sets itself, the FIFO group and the priority of 5.x (``__SHARDINGKEY``,
``__PRIORITY``) and the delivery time of the legacy clients (``__STARTDELIVERTIME``).
``CHECK_IMMUNITY_TIME_IN_SECONDS`` is the user's, as in RocketMQ."""


class MessageProperty(StrEnum):
    """``rocketmq.consts.MessageProperty``: names accepted by ``ReceivedMessage.get_property``."""

    TRACE_SWITCH = "TRACE_ON"
    MSG_REGION = "MSG_REGION"
    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"


Headers = list[tuple[str, bytes]]
"""Kafka record headers as the adapter writes them: (property name, UTF-8 value)."""

_OWN_FIELDS = frozenset({UNIQ_KEY, TAGS, KEYS})


def _utf8(value: str | bytes) -> bytes:
    return value if type(value) is bytes else str(value).encode("utf-8")


def message_headers(
    unique_key: str,
    tags: str | bytes | None = None,
    keys: str | bytes | None = None,
    properties: Mapping[str, str | bytes] | None = None,
    *,
    omit: Collection[str] = (),
    born_ms: int | None = None,
    extra: Iterable[tuple[str, str | bytes]] = (),
) -> Headers:
    """The headers of a message on a real topic, the one place they are built.

    ``UNIQ_KEY``, ``TAGS`` and ``KEYS`` first, then ``properties`` except ``omit`` and except
    any name set by the other arguments (a stale copy never wins over them), then
    ``BORN_TIMESTAMP`` = ``born_ms`` unless ``properties`` carries one, then ``extra``.
    """
    headers: Headers = [(UNIQ_KEY, unique_key.encode("utf-8"))]
    if tags is not None:
        headers.append((TAGS, _utf8(tags)))
    if keys is not None:
        headers.append((KEYS, _utf8(keys)))
    extra = list(extra)
    if properties:
        if omit or extra:
            skip = _OWN_FIELDS.union(omit, (name for name, _ in extra))
        else:
            skip = _OWN_FIELDS
        headers.extend(
            (name, _utf8(value)) for name, value in properties.items() if name not in skip
        )
    if born_ms is not None and not (properties and BORN_TIMESTAMP in properties):
        headers.append((BORN_TIMESTAMP, str(born_ms).encode()))
    headers.extend((name, _utf8(value)) for name, value in extra)
    return headers
