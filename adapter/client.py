"""The drop-in facade: ``adapter.client`` replaces ``rocketmq.client`` in an import.

Reproduces the public names of ``rocketmq.client`` in rocketmq-client-python 2.0, with the
same enum values and return types. ``set_name_server_address`` takes Kafka bootstrap servers.

Known gaps: ``TransactionMQProducer`` arrives with the transactions work; ``PullConsumer``
(not in 2.0's ``__all__``) is not provided.
"""

from __future__ import annotations

from enum import IntEnum

from adapter.config import MessageModel
from adapter.consumer import ConsumeStatus, PushConsumer
from adapter.message import Message, ReceivedMessage
from adapter.producer import Producer, SendResult, SendStatus
from adapter.properties import MessageProperty

__all__ = [
    "SendStatus",
    "Message",
    "ReceivedMessage",
    "Producer",
    "PushConsumer",
    "TransactionStatus",
    "ConsumeStatus",
    "SendResult",
    "MessageModel",
    "MessageProperty",
]


class TransactionStatus(IntEnum):
    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2
