"""RocketMQ's property names, as Kafka header keys.

Reproduces ``MessageConst`` (the keys below are RocketMQ's own strings) and the
``rocketmq.consts.MessageProperty`` enum of rocketmq-client-python 2.0. On a real topic every
property travels as a Kafka header of the same name with a UTF-8 value, so plain Kafka
consumers and Spark read them without the adapter.

Known gaps: none of RocketMQ's region, trace or pop-checkpoint properties are produced.
"""

from __future__ import annotations

from enum import StrEnum

KEYS = "KEYS"
TAGS = "TAGS"
DELAY = "DELAY"
UNIQ_KEY = "UNIQ_KEY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
TRANSACTION_ID = "__transactionId__"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
SHARDING_KEY = "__SHARDINGKEY"
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
"""System properties the adapter sets itself; ``Message.set_property`` refuses them."""


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
